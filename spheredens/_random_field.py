"""The random band-limited fields of the initial density ``random_smooth``, one per domain.

:data:`RANDOM_FIELDS` is the table of the domains on which ``random_smooth`` is defined: for
each, the field f (a trigonometric polynomial on the circle, a sum of spherical harmonics on
the sphere) and a quadrature of exp(amplitude f) exact to round-off. The density object
(:class:`~spheredens.initial.RandomSmooth`) gives the seed, the bandwidth and the amplitude.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ._types import Array
from .geometry import circle_angle


@dataclass(frozen=True)
class RandomField:
    """``random_smooth`` on one domain (its entry of :data:`RANDOM_FIELDS`).

    Attributes
    ----------
    field : callable
        ``(density, x) -> amplitude * f(x)``, the random band-limited exponent.
    log_mass : callable
        ``(density, m) -> (shift, mass)``: mass = int exp(field - shift) by a quadrature with
        ``m`` points per angle, exact to round-off.
    max_bandwidth : int
        The largest ``bandwidth`` accepted (the set-up cost grows with it).
    setup_seconds : callable
        ``bandwidth -> seconds``: the set-up's cost on one core (measured), for the refusal.
    """

    field: Callable[[Any, Array], Array]
    log_mass: Callable[[Any, int], tuple[float, float]]
    max_bandwidth: int = 4096
    setup_seconds: Callable[[int], float] = lambda bandwidth: 0.0


#: the most refinements (x 1.5 each) of random_smooth's normalization before the last is taken
MASS_REFINEMENTS = 8
#: points of a chunk of the field's evaluation (its work arrays: a few complex numbers each)
_FIELD_CHUNK = 1 << 16
#: columns of the sphere's Legendre recurrences formed at once
_LEGENDRE_COLUMNS = 2048


def _fourier_sum(coefficients: Array, angle: Array, index: Array | None = None) -> Array:
    """Re sum_{k=0}^{K} c_k e^{i k angle} by Horner's rule in e^{i angle}, for coefficients
    ``coefficients`` (K + 1, U) complex: column ``index[j]`` (default j) for the angle j; in
    chunks of :data:`_FIELD_CHUNK` points."""
    top = len(coefficients) - 1
    out = np.empty(len(angle))
    for a in range(0, len(angle), _FIELD_CHUNK):
        rows = slice(a, a + _FIELD_CHUNK)
        w = np.exp(1j * angle[rows])
        idx = np.arange(a, a + len(w)) if index is None else index[rows]
        acc = coefficients[top][idx]
        for k in range(top - 1, -1, -1):
            acc *= w
            acc += coefficients[k][idx]
        out[rows] = acc.real
    return out


def _circle_field(density: Any, x: Array) -> Array:
    """amplitude sum_k (a_k cos k theta + b_k sin k theta): Re sum_k (a_k - i b_k) e^{i k theta}."""
    a, b = density._coefficients()
    c = np.concatenate([[0.0], a - 1j * b]) * density.amplitude
    theta = np.asarray(circle_angle(x), dtype=float)
    return _fourier_sum(
        c[:, None], theta.reshape(-1), np.zeros(theta.size, dtype=np.int64)
    ).reshape(theta.shape)


def _circle_log_mass(density: Any, m: int) -> tuple[float, float]:
    """The field at m equally spaced angles by one inverse FFT, and their mean."""
    a, b = density._coefficients()
    spectrum = np.zeros(m // 2 + 1, dtype=complex)
    spectrum[1 : density.bandwidth + 1] = (a - 1j * b) * density.amplitude
    fine = np.fft.irfft(spectrum, n=m) * (m / 2)
    shift = float(fine.max())
    return shift, 2.0 * np.pi * float(np.mean(np.exp(fine - shift)))


def _legendre_rows(z: Array, lmax: int, first: Array | None = None):
    """Yield (l, q, start) for l = 0..lmax: q[m, j] = q_lm(z[start + j]) for m = 0..l, the
    orthonormal associated Legendre functions (Y_l0 = q_l0 and sqrt(2) q_lm cos m phi,
    sqrt(2) q_lm sin m phi an orthonormal basis of the degree-l harmonics), by the stable
    three-term recurrence in l. With ``first`` (non-decreasing, one index per degree), degree
    l is formed at the points from ``first[l]`` on only."""
    z = np.asarray(z, dtype=float)
    s = np.sqrt(np.maximum(1.0 - z * z, 0.0))
    start, prev2 = 0, None
    prev = np.full((1, len(z)), 0.5 / math.sqrt(math.pi))
    yield 0, prev, 0
    for l in range(1, lmax + 1):
        if first is not None and first[l] > start:
            cut = int(first[l]) - start
            prev, prev2 = prev[:, cut:], None if prev2 is None else prev2[:, cut:]
            z, s, start = z[cut:], s[cut:], int(first[l])
        m = np.arange(l, dtype=float)
        a = np.sqrt((4.0 * l * l - 1.0) / (l * l - m * m))
        new = np.empty((l + 1, len(z)))
        np.multiply(prev[:l], z, out=new[:l])
        new[:l] *= a[:, None]
        if l >= 2:
            b = np.sqrt(((l - 1.0) ** 2 - m[: l - 1] ** 2) / (4.0 * (l - 1.0) ** 2 - 1.0))
            new[: l - 1] -= (a[: l - 1] * b)[:, None] * prev2[: l - 1]
        new[l] = math.sqrt((2.0 * l + 1.0) / (2.0 * l)) * s * prev[l - 1]
        yield l, new, start
        prev2, prev = prev, new


@functools.lru_cache(maxsize=32)
def _sphere_coefficients(density: Any) -> tuple[Array, Array]:
    """(C, S), each (L + 1, L + 1) indexed [l, m]: amplitude f(x) = sum_{l, m} q_lm(z) (C_lm cos
    m phi + S_lm sin m phi), by the addition theorem P_l(<x, n>) = 4 pi / (2 l + 1) sum_m
    Y_lm(x) Y_lm(n) applied to the random directions n_lj (drawn as the docstring of
    :class:`~spheredens.initial.RandomSmooth` says): O(L^4) for bandwidth L instead of O(L^3)
    per point."""
    L = density.bandwidth
    rng = np.random.default_rng(density.seed)
    directions, gains = [], []
    for l in range(1, L + 1):  # the draws of the definition, in its order
        centres = rng.standard_normal((2 * l + 1, 3))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        directions.append(centres)
        gains.append(rng.standard_normal(2 * l + 1))
    n, g = np.concatenate(directions), np.concatenate(gains)
    degree = np.repeat(np.arange(1, L + 1), 2 * np.arange(1, L + 1) + 1)
    z, phi = np.clip(n[:, 2], -1.0, 1.0), np.arctan2(n[:, 1], n[:, 0])
    C, S = np.zeros((L + 1, L + 1)), np.zeros((L + 1, L + 1))
    for a in range(0, len(z), _LEGENDRE_COLUMNS):  # directions in degree order, in column chunks
        cols = slice(a, a + _LEGENDRE_COLUMNS)
        deg, ph, gc = degree[cols], phi[cols], g[cols]
        first = np.searchsorted(deg, np.arange(int(deg[-1]) + 1))  # the columns of degree >= l
        for l, q, start in _legendre_rows(z[cols], int(deg[-1]), first):
            lo, hi = np.searchsorted(deg, [l, l + 1])
            if hi > lo:
                w = q[:, lo - start : hi - start] * gc[lo:hi]
                angle = np.multiply.outer(np.arange(l + 1.0), ph[lo:hi])
                C[l, : l + 1] += np.sum(w * np.cos(angle), axis=1)
                S[l, : l + 1] += np.sum(w * np.sin(angle), axis=1)
    l = np.arange(L + 1.0)
    factor = (4.0 * np.pi / (2.0 * l + 1.0))[:, None] * np.where(l > 0, 2.0, 1.0)[None, :]
    factor *= density.amplitude / math.sqrt(L)
    return C * factor, S * factor


def _ring_sums(density: Any, z: Array) -> Array:
    """G (L + 1, len(z)) complex: amplitude f = Re sum_m G_m(z) e^{i m phi} on the ring z,
    G_m = sum_l q_lm(z) (C_lm - i S_lm)."""
    C, S = _sphere_coefficients(density)
    coefficients = C - 1j * S
    L = len(C) - 1
    out = np.empty((L + 1, len(z)), dtype=complex)
    for a in range(0, len(z), _LEGENDRE_COLUMNS):
        acc = np.zeros((L + 1, len(z[a : a + _LEGENDRE_COLUMNS])), dtype=complex)
        for l, q, _ in _legendre_rows(z[a : a + _LEGENDRE_COLUMNS], L):
            acc[: l + 1] += coefficients[l, : l + 1, None] * q
        out[:, a : a + _LEGENDRE_COLUMNS] = acc
    return out


def _sphere_field(density: Any, x: Array) -> Array:
    """The field at points x (..., 3): the sums over l once per distinct z (a grid's rings),
    then Horner's rule in e^{i phi} at every point."""
    pts = np.asarray(x, dtype=float).reshape(-1, 3)
    rings, index = np.unique(np.clip(pts[:, 2], -1.0, 1.0), return_inverse=True)
    g = _ring_sums(density, rings)
    return _fourier_sum(g, np.arctan2(pts[:, 1], pts[:, 0]), index.reshape(-1)).reshape(
        np.shape(x)[:-1]
    )


def _sphere_log_mass(density: Any, m: int) -> tuple[float, float]:
    """The Gauss product rule with m / 2 latitudes and m longitudes: the field on each ring by
    one inverse FFT of its sums."""
    nodes, wts = np.polynomial.legendre.leggauss(m // 2)
    g = _ring_sums(density, nodes)
    spectrum = np.zeros((m // 2, m // 2 + 1), dtype=complex)
    spectrum[:, : len(g)] = g.T
    spectrum[:, 0] *= 2.0  # irfft counts the mode 0 once and the others twice
    fine = np.fft.irfft(spectrum, n=m, axis=1) * (m / 2)
    shift = float(fine.max())
    return shift, float(np.sum(np.exp(fine - shift) * wts[:, None]) * 2.0 * np.pi / m)


#: the largest bandwidth of random_smooth on the circle (16 points per shortest wavelength at
#: the largest n, 65536) and on the sphere, where its set-up (the coefficients by the addition
#: theorem, O(L^4), then the normalization on grids of (8 L)^2 / 2 points and 1.5 times finer)
#: takes about 15 s at 256 (measured on one core: 0.6 s at 64, 1.5 s at 128; 3.5e-9 L^4 s)
MAX_CIRCLE_BANDWIDTH = 4096
MAX_SPHERE_BANDWIDTH = 256

#: domain name -> the random field of ``random_smooth`` there (none elsewhere)
RANDOM_FIELDS: dict[str, RandomField] = {
    "circle": RandomField(
        _circle_field,
        _circle_log_mass,
        MAX_CIRCLE_BANDWIDTH,
        lambda bandwidth: 4e-9 * bandwidth * 65536.0,
    ),
    "sphere": RandomField(
        _sphere_field,
        _sphere_log_mass,
        MAX_SPHERE_BANDWIDTH,
        lambda bandwidth: 3.5e-9 * float(bandwidth) ** 4,
    ),
}
