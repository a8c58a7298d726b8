"""Does the tail's thinning into filaments spoil the softmax mean a cluster sees? (seconds)

On the plateau each cluster sits where the kernel's mean over the tail about +-w puts its
velocity to zero (../plateau.py), and the particles of that tail gather into filaments (the
recording cells about +-w populated fall from ~88 to 20-50 between t = 32 and 64). Here a
smooth log-quadratic tail about w (log rho = -30 + 10 z1 + 14 z2 - 20 z1^2, z the coordinates
in w's tangent plane; gradients as in the runs) is integrated on a fine polar grid (400 x 800
over 0.5 rad), then its mass is moved across to lines z2 = k GAP and gathered into particles
of 0.01 rad along them: filaments GAP apart, each particle with the exact mass of its strip at
its centroid. Printed: the mean of y under e^{kappa <w, y>} rho (kappa = 500, a kernel 0.045
rad wide, as at beta = 300) from the filaments' point masses against the fine grid's.

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/filaments.py
"""

import math

import numpy as np
from scipy.special import logsumexp

KAPPA = 500.0
GAPS = (0.01, 0.02, 0.04, 0.08, 0.16)
ALONG = 0.01


def kernel_mean(log_m: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    logits = log_m + KAPPA * (x @ w)
    return np.exp(logits - logsumexp(logits)) @ x


def main() -> None:
    w = np.array([math.sin(0.34), 0.0, math.cos(0.34)])
    e1 = np.cross(w, [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(w, e1)
    theta = (np.arange(400) + 0.5) * 0.5 / 400
    phi = (np.arange(800) + 0.5) * 2.0 * math.pi / 800
    th, ph = np.meshgrid(theta, phi, indexing="ij")
    points = (np.cos(th)[..., None] * w + np.sin(th)[..., None]
              * (np.cos(ph)[..., None] * e1 + np.sin(ph)[..., None] * e2)).reshape(-1, 3)
    area = (np.sin(th) * (0.5 / 400) * (2.0 * math.pi / 800)).ravel()
    z1, z2 = points @ e1, points @ e2
    log_m = -30.0 + 10.0 * z1 + 14.0 * z2 - 20.0 * z1**2 + np.log(area)
    exact = kernel_mean(log_m, points, w)
    print(f"kernel width {KAPPA ** -0.5:.3f} rad; offset of the exact mean from w: "
          f"{np.linalg.norm(exact - w):.5f} rad")
    for gap in GAPS:
        line = np.round(z2 / gap) * gap
        moved = points + (line - z2)[:, None] * e2
        moved /= np.linalg.norm(moved, axis=1, keepdims=True)
        key = np.round(moved @ e1 / ALONG).astype(np.int64) * 100_000 + np.round(line / gap).astype(
            np.int64)
        _, group = np.unique(key, return_inverse=True)
        mass = np.full(group.max() + 1, -np.inf)
        np.logaddexp.at(mass, group, log_m)
        centre = np.zeros((len(mass), 3))
        np.add.at(centre, group, np.exp(log_m - mass[group])[:, None] * moved)
        centre /= np.linalg.norm(centre, axis=1, keepdims=True)
        error = np.linalg.norm(kernel_mean(mass, centre, w) - exact)
        print(f"filaments {gap:.2f} rad apart ({gap * KAPPA ** 0.5:.2f} kernel widths), "
              f"{len(mass)} particles: the mean errs by {error:.1e} rad "
              f"({math.degrees(error):.4f} degrees)")


if __name__ == "__main__":
    main()
