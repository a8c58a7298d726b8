"""``python -m spheredens.cli``: the ``spheredens`` command (:func:`spheredens.cli.main`)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
