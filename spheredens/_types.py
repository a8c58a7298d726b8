"""Type aliases shared by the package."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: an array of float64 values (every numerical array of spheredens)
Array = NDArray[np.float64]
