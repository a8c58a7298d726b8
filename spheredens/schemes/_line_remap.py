"""Conservative remap of log masses with centroids along many periodic lines at once.

The one-dimensional step of the sphere's ``log_sl`` (:mod:`._sphere_log_sl`), which sweeps
it along the rings and the great circles of its grid. Each of L lines is periodic with n
uniform cells of width h (period P = n h). A line carries, per cell,

* ``ell``: the log of the cell average of its line density (mass = exp(ell) h);
* ``offset``: the offset of the cell's centroid from its centre, in cell widths;
* ``carry``: a quantity moved with the mass (the centroid offset across the line), averaged
  over the mass that a new cell receives.

The velocity is known at the cells' **centroids** (the nodes X_k = (k + 1/2 + offset_k) h) and
is linear between them, frozen over the step. The characteristics of such a field are known in
closed form (x(s) = x* + (x_0 - x*) e^{a s} on a segment of slope a), so the feet of the faces
and the images of the pieces are exact for that field at any step, with no CFL limit; a mass
narrower than a cell sits at its node and moves with the velocity there, exactly.

The remap: new cell j receives the mass of the old log-linear reconstruction between the feet
of its faces (cut at the old faces), each piece with its centroid carried forward along the
same flow. The feet partition the line, so each line's mass is conserved to round-off; every
piece is a positive integral computed from logarithms, so every cell keeps its relative
accuracy however small it is (:mod:`._circle_log_sl` gives the 1-D pieces: the profile of a
cell with a given centroid, log integrals of exponentials).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from .._types import Array
from ._circle_log_sl import (
    _EDGE,
    _langevin_slope,
    backward_within_segment,
    inverse_langevin,
    langevin,
    log_integral_exp,
    relative_expm1,
    travel_time,
)

Index = NDArray[np.int64]

#: the narrowest shrink of a cell's profile about its centroid (a mass of no width: an atom)
MIN_SHRINK = 1e-12

#: a cell's profile is shrunk about its centroid only where the standard deviation of its mass
#: is below this fraction of its log-linear profile's
SHRINK_ONSET = 0.5


class LineField:
    """A periodic piecewise-linear velocity on L lines of n cells of width h, through the nodes
    ``nodes`` (L, n) (each inside its cell, increasing) with values ``speeds`` (L, n)."""

    def __init__(self, nodes: Array, speeds: Array, h: float) -> None:
        self.L, self.n = nodes.shape
        self.h = float(h)
        self.period = self.n * self.h
        self.nodes = nodes
        self.speeds = speeds

    def _extended(self, speeds: Array) -> tuple[Array, Array]:
        """Nodes and speeds over three periods and one node, (L, 3n + 1): node e is that of
        cell e mod n shifted by (e // n - 2) periods."""
        n, P = self.n, self.period
        reps = np.arange(3 * n + 1)
        X = self.nodes[:, reps % n] + (reps // n - 2)[None, :] * P
        return X, speeds[:, reps % n]

    def _right_displacement(self, x: Array, line: Index, speeds: Array, dt: float) -> Array:
        """Backward displacement D >= 0 over time dt of the points ``x`` in [0, P) of lines
        ``line`` where the field (``speeds`` at the nodes) is positive; 0 elsewhere."""
        n, h = self.n, self.h
        X, U = self._extended(speeds)
        k = np.minimum(np.floor(x / h).astype(np.int64), n - 1)
        right = (
            2 * n + k + (x >= self.nodes[line, k]).astype(np.int64)
        )  # x in segment (right - 1, right)
        left = right - 1
        x0, u0, u1 = X[line, left], U[line, left], U[line, right]
        length = X[line, right] - x0
        frac = x - x0
        out, beyond, tau0 = backward_within_segment(frac, u0, (u1 - u0) / length, dt)
        beyond = np.flatnonzero(beyond)
        if beyond.size:
            out[beyond] = frac[beyond] + self._node_paths(
                X, U, line[beyond], left[beyond], dt - tau0[beyond], dt
            )
        return out

    def _node_paths(
        self, X: Array, U: Array, line: Index, start: Index, rest: Array, dt: float
    ) -> Array:
        """Backward displacement from the extended nodes ``start`` (U > 0 there) of lines
        ``line`` over the times ``rest`` in [0, dt], through whole segments as far as the time
        allows, whole periods first."""
        L, E = X.shape
        n, P = self.n, self.period
        lengths = np.diff(X, axis=1)  # segment e (nodes e - 1, e) at column e - 1
        through = (U[:, :-1] > 0.0) & (U[:, 1:] > 0.0)
        cap = 2.0 * dt + 1.0  # no path within dt crosses a longer segment: keeps the sums scaled
        tau = np.where(
            through,
            np.minimum(
                travel_time(
                    lengths, np.where(through, U[:, :-1], 1.0), np.where(through, U[:, 1:], 1.0)
                ),
                cap,
            ),
            0.0,
        )
        cum = np.concatenate((np.zeros((L, 1)), np.cumsum(tau, axis=1)), axis=1)  # (L, E)
        # whole periods: a line without a stagnation point is travelled round in a time T
        loop = cum[:, 2 * n] - cum[:, n]
        free = through[:, n : 2 * n].all(axis=1) & (loop > 0.0) & (loop < cap)
        laps = np.where(free[line], np.floor(rest / np.where(free[line], loop[line], 1.0)), 0.0)
        rest = np.maximum(rest - laps * np.where(free[line], loop[line], 0.0), 0.0)
        # the last node at or before ``start`` that cannot be passed going left
        barrier = np.concatenate((np.ones((L, 1), dtype=bool), ~through), axis=1)
        last_barrier = np.maximum.accumulate(np.where(barrier, np.arange(E)[None, :], 0), axis=1)
        # search per line: keys made increasing across lines by a per-line offset
        span = float(cum[:, -1].max()) + 1.0
        keys = (cum + (np.arange(L) * 2.0 * span)[:, None]).reshape(-1)
        target = cum[line, start] - rest + line * 2.0 * span
        k = np.searchsorted(keys, target, side="left") - line * E
        k = np.clip(np.maximum(k, last_barrier[line, start]), 1, start)
        left_time = np.maximum(rest - (cum[line, start] - cum[line, k]), 0.0)
        u_k = U[line, k]
        a = (u_k - U[line, k - 1]) / (X[line, k] - X[line, k - 1])
        return (
            laps * P
            + (X[line, start] - X[line, k])
            + u_k * left_time * relative_expm1(a * left_time)
        )

    def _mirrored(self) -> "LineField":
        """The field seen in the coordinate x' = P - x (cell k becomes n - 1 - k)."""
        return LineField(self.period - self.nodes[:, ::-1], -self.speeds[:, ::-1], self.h)

    def trace(self, x: Array, line: Index, dt: float, *, forward: bool = False) -> Array:
        """Feet at time t of the characteristics through the points ``x`` (continuous
        coordinates along their lines ``line``) at time t + dt; with ``forward``, their images
        at time t + dt. Exact for the piecewise-linear field frozen over the step."""
        x = np.asarray(x, dtype=float)
        line = np.asarray(line, dtype=np.int64)
        P = self.period
        base = np.floor(x / P) * P
        xr = np.clip(x - base, 0.0, np.nextafter(P, 0.0))
        speeds = -self.speeds if forward else self.speeds
        right = self._right_displacement(xr, line, speeds, dt)
        xm = np.clip((P - xr) % P, 0.0, np.nextafter(P, 0.0))
        left = self._mirrored()._right_displacement(xm, line, -speeds[:, ::-1], dt)
        return x - right + left


def _langevin_second(z: Array) -> Array:
    """L''(z) = 2 coth(z) / sinh(z)^2 - 2 / z^3 (series below 0.1)."""
    small = np.abs(z) < 0.1
    zs = np.where(small, 1.0, z)
    with np.errstate(over="ignore", under="ignore"):
        big = 2.0 / (np.tanh(zs) * np.sinh(zs) ** 2) - 2.0 / zs**3
    return np.where(small, -2.0 * z / 15.0 + 8.0 * z**3 / 189.0, big)


def tilted_moments(z: Array, half: Array) -> tuple[Array, Array, Array]:
    """E[t], E[t^2], E[t^3] of t under e^{(z / half) t} on [-half, half] (from the cumulants
    half^k L^(k-1)(z) of that law, L the Langevin function)."""
    k1 = half * langevin(z)
    k2 = half**2 * _langevin_slope(z)
    k3 = half**3 * _langevin_second(z)
    return k1, k2 + k1**2, k3 + 3.0 * k2 * k1 + k1**3


class Profiles:
    """The density on each cell of a line: w(t) e^{sigma t}, t the distance from the cell's
    centre, w(t) = w0 + w1 t >= 0 a known linear weight (the metric: 1 along a ring, the
    chord of |sin s| along a great circle through the poles) and sigma the log-slope whose
    profile has the cell's centroid (offset c in cell widths)."""

    def __init__(
        self, offset: Array, h: float, w0: Array | None = None, w1: Array | None = None
    ) -> None:
        self.h = h
        half = 0.5 * h
        y = 2.0 * np.asarray(offset, dtype=float)  # the centroid in half-widths
        z = inverse_langevin(y)  # the unweighted profile; exact where w1 = 0
        if w1 is not None and np.any(w1 != 0.0):
            target = y * half
            for _ in range(8):
                m1, m2, m3 = tilted_moments(z, half)
                norm = w0 + w1 * m1
                mean = (w0 * m1 + w1 * m2) / norm
                var = np.maximum((w0 * m2 + w1 * m3) / norm - mean**2, 1e-300)
                step = (target - mean) / var * half  # dz = d sigma * half
                z = z + np.clip(step, -1.0 - np.abs(z), 1.0 + np.abs(z))
        self.slope = z / half
        self.w0 = np.ones_like(self.slope) if w0 is None else w0
        self.w1 = np.zeros_like(self.slope) if w1 is None else w1

    def log_integral(self, k: Any, lo: Array, hi: Array) -> tuple[Array, Array]:
        """(log int_lo^hi w e^{sigma t} dt, the centroid of w e^{sigma t} there) on the cells
        ``k`` (indices into the profile arrays), lo <= hi relative to the cell centres."""
        log_mass, centroid, _ = self.log_moments(k, lo, hi)
        return log_mass, centroid

    def log_moments(self, k: Any, lo: Array, hi: Array) -> tuple[Array, Array, Array]:
        """:meth:`log_integral` and the variance of w e^{sigma t} on [lo, hi]."""
        slope, w0, w1 = self.slope[k], self.w0[k], self.w1[k]
        half = 0.5 * (hi - lo)
        mid = 0.5 * (lo + hi)
        base = log_integral_exp(slope, lo, hi)
        m1, m2, m3 = tilted_moments(slope * half, half)  # of s = t - mid
        w_mid = w0 + w1 * mid  # w = w_mid + w1 s
        weighted = np.maximum(w_mid + w1 * m1, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            s1 = np.where(weighted > 0.0, (w_mid * m1 + w1 * m2) / weighted, m1)
            s2 = np.where(weighted > 0.0, (w_mid * m2 + w1 * m3) / weighted, m2)
            return base + np.log(weighted), mid + s1, np.maximum(s2 - s1**2, 0.0)


def log_line_mass(ell: Array, h: float) -> Array:
    """log sum_j exp(ell_j) h of each line (rows), by log-sum-exp (-inf for an empty line)."""
    with np.errstate(divide="ignore"):
        return logsumexp(ell, axis=1) + math.log(h)


def remap_lines(
    ell: Array,
    offset: Array,
    carry: Array,
    field: LineField,
    dt: float,
    floor: float,
    weight: tuple[Array, Array] | None = None,
    spread: tuple[Array, Array] | None = None,
) -> tuple[Array, Array, Array, Array, tuple[Array, Array] | None]:
    """One remap of every line along the characteristics of ``field`` over ``dt``.

    Returns (ell, offset, carry, emptied, spread): the new log cell averages (each line's mass
    made equal to the old one: the remap conserves it up to the round-off of its logs, ~1e-14;
    the factor that removes that drift touches no cell's relative accuracy), centroid offsets
    and carried quantity, shape (L, n) each, a boolean (L, n) of the cells that received no
    mass (a preimage of no length in float64), and the new ``spread``; ``floor`` is the
    smallest log kept.

    ``spread`` = (along, across): the variances of each cell's mass along and across the line,
    in cell widths squared, or None. A cell whose standard deviation along the line is below
    :data:`SHRINK_ONSET` of its log-linear profile's keeps its mass on the profile shrunk about
    its centroid by the ratio of the two over :data:`SHRINK_ONSET` (a cluster narrower than a
    cell stays narrow: nothing of it is handed to a neighbour unless it straddles a face); each
    piece's variance is carried to its image stretched by the flow, and a new cell's variances
    are those of the mass it receives.
    """
    L, n = ell.shape
    h, P = field.h, field.period
    lines = np.repeat(np.arange(L), n)
    faces = np.tile(np.arange(n) * h, L)
    feet = field.trace(faces, lines, dt).reshape(L, n)
    feet = np.concatenate((feet, feet[:, :1] + P), axis=1)
    feet = np.maximum.accumulate(feet, axis=1)
    first = np.floor(feet[:, 0] / h)
    inner = (first[:, None] + np.arange(1, n + 1)[None, :]) * h  # n old faces after the first foot
    cuts = np.concatenate((feet, inner), axis=1)  # (L, 2n + 1)
    order = np.argsort(cuts, axis=1, kind="stable")
    cuts = np.take_along_axis(cuts, order, axis=1)
    is_face = order >= n + 1
    cell = (first[:, None] + np.cumsum(is_face, axis=1)[:, :-1]).astype(np.int64)  # (L, 2n) pieces
    new = np.minimum(np.cumsum(~is_face, axis=1)[:, :-1] - 1, n - 1)
    lo = np.maximum(cuts[:, :-1], cell * h)
    hi = np.maximum(np.minimum(cuts[:, 1:], (cell + 1) * h), lo)
    k = cell % n
    rows = np.arange(L)[:, None]
    if weight is None:
        profiles = Profiles(offset, h)
    else:
        profiles = Profiles(offset, h, 0.5 * (weight[0] + weight[1]), (weight[1] - weight[0]) / h)
    full = (np.full(ell.shape, -0.5 * h), np.full(ell.shape, 0.5 * h))
    whole, _, full_var = profiles.log_moments(slice(None), *full)
    level = ell + math.log(h) - whole
    centre = (cell + 0.5) * h
    lo, hi = lo - centre, hi - centre
    if spread is not None:
        # the profile shrunk about its centroid c by lam: the piece [lo, hi] holds what the
        # unshrunk profile holds on c + ([lo, hi] - c) / lam
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.sqrt(spread[0] * h * h / full_var)
        lam = np.where(np.isfinite(lam), lam, 1.0)
        # the profile is shrunk only where the mass is clearly narrower than it (ratio below
        # SHRINK_ONSET), and then by lam / SHRINK_ONSET: near-log-linear cells keep their
        # profile, so that nothing anti-diffuses; the pieces' variances are scaled back to the
        # carried one (ratio, at most 1)
        shrink = np.clip(lam / SHRINK_ONSET, MIN_SHRINK, 1.0)
        ratio = np.minimum((lam / shrink) ** 2, 1.0)[rows, k]
        lam = shrink[rows, k]
        c = offset[rows, k] * h
        lo = np.clip(c + (lo - c) / lam, -0.5 * h, 0.5 * h)
        hi = np.clip(c + (hi - c) / lam, lo, 0.5 * h)
    piece, at, var = profiles.log_moments((rows, k), lo, hi)
    if spread is not None:
        at = c + lam * (at - c)
        var = ratio * lam * lam * var
    piece = piece + level[rows, k]
    mid = centre + at
    image = field.trace(mid.reshape(-1), np.repeat(np.arange(L), 2 * n), dt, forward=True).reshape(
        L, 2 * n
    )
    # reduce the pieces of each new cell (new is non-decreasing along a row, every cell present)
    group = (rows * n + new).reshape(-1)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    flat = piece.reshape(-1)
    top = np.maximum.reduceat(flat, starts)
    count = np.diff(np.append(starts, flat.size))
    empty = top == -np.inf
    with np.errstate(under="ignore", invalid="ignore"):
        weight = np.exp(flat - np.repeat(np.where(empty, 0.0, top), count))
    weight = np.where(np.isfinite(weight), weight, 0.0)
    total = np.add.reduceat(weight, starts)
    new_centre = (np.arange(n) + 0.5) * h
    arm = (image.reshape(-1) - np.repeat(np.tile(new_centre, L), count)) / h
    moment = np.add.reduceat(weight * arm, starts)
    across = carry[rows, k].reshape(-1)
    carried = np.add.reduceat(weight * across, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        out_ell = np.where(empty, -np.inf, top + np.log(total) - math.log(h)).reshape(L, n)
        out_offset = np.where(empty, 0.0, moment / total).reshape(L, n)
        out_carry = np.where(empty, 0.0, carried / total).reshape(L, n)
    out_spread = None
    if spread is not None:
        # each piece's variance stretched by its image's: the images of the piece ends are the
        # new faces (of the feet) and the forward traces of the old faces
        ends = np.concatenate((np.tile(np.arange(n + 1) * h, (L, 1)), inner), axis=1)
        inner_image = field.trace(inner.reshape(-1), np.repeat(np.arange(L), n), dt, forward=True)
        ends[:, n + 1 :] = inner_image.reshape(L, n)
        ends = np.take_along_axis(ends, order, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            stretch = np.diff(ends, axis=1) / np.diff(cuts, axis=1)
        stretch = np.where(np.isfinite(stretch) & (stretch > 0.0), stretch, 1.0)
        var_image = (var * stretch * stretch).reshape(-1) / (h * h)
        second = np.add.reduceat(weight * (var_image + arm * arm), starts)
        across2 = np.add.reduceat(weight * (spread[1][rows, k].reshape(-1) + across**2), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            along_var = np.where(empty, 1.0 / 12.0, second / total - (moment / total) ** 2)
            across_var = np.where(empty, 1.0 / 12.0, across2 / total - (carried / total) ** 2)
        out_spread = (
            np.maximum(along_var, 0.0).reshape(L, n),
            np.maximum(across_var, 0.0).reshape(L, n),
        )
    out_offset = np.clip(out_offset, -0.5 * _EDGE, 0.5 * _EDGE)
    out_carry = np.clip(out_carry, -0.5 * _EDGE, 0.5 * _EDGE)
    drift = log_line_mass(out_ell, h) - log_line_mass(ell, h)
    drift = np.where(np.isfinite(drift), drift, 0.0)
    out_ell = np.maximum(out_ell - drift[:, None], floor)
    if spread is not None:
        # a shrunk profile may leave a cell without mass by design: only a preimage of no
        # length is a loss
        empty = np.diff(feet, axis=1) <= 0.0
    return out_ell, out_offset, out_carry, empty.reshape(L, n), out_spread
