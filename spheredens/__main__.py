"""``python -m spheredens``: the ``spheredens`` command."""
from .cli import main

raise SystemExit(main())
