"""Wasserstein distances between weighted point sets on the circle (wraps POT)."""
from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def w2_circle(theta_a: Array, weight_a: Array, theta_b: Array, weight_b: Array, *,
              tol: float = 1e-12) -> float:
    """Exact W2 (geodesic cost, radians) between two weighted point sets on S^1.

    Parameters
    ----------
    theta_a, theta_b : ndarray
        Angles in radians (any real values; taken modulo 2 pi).
    weight_a, weight_b : ndarray
        Non-negative weights, each summing to 1 (they are renormalized).
    tol : float
        Tolerance of POT's binary search over the rotation parameter.

    Notes
    -----
    ``ot.wasserstein_circle`` works on the circle of circumference 1 (coordinates in [0, 1))
    and returns W_p^p: the result is W2 = 2 pi sqrt(value).
    """
    import ot

    u = np.mod(np.asarray(theta_a, dtype=float) / (2.0 * np.pi), 1.0)
    v = np.mod(np.asarray(theta_b, dtype=float) / (2.0 * np.pi), 1.0)
    wa = np.clip(np.asarray(weight_a, dtype=float), 0.0, None)
    wb = np.clip(np.asarray(weight_b, dtype=float), 0.0, None)
    w2p = ot.wasserstein_circle(u, v, wa / wa.sum(), wb / wb.sum(), p=2, eps=tol)
    value = float(np.asarray(w2p).reshape(-1)[0])
    return float(2.0 * np.pi * np.sqrt(max(value, 0.0)))
