"""Funk-Hecke multipliers of low rank in kappa, and the general-B evaluator at points.

With kappa(x) = beta |B^T x| and the image point u(x) = B^T x / |B^T x|, the scaled sums
e^{-kappa(x)} Z(x) and e^{-kappa(x)} dZ/dkappa are H(u(x)) and D(u(x)), where

    H(u) = sum_l s_l(kappa~(u)) mu_l(u),   D(u) = sum_l ds_l(kappa~(u)) mu_l(u),

kappa~(u) = beta / |B^{-T} u| (equal to kappa(x) at u = u(x)), s_l, ds_l the scaled Funk-Hecke
multipliers and mu_l the degree-l part of the density (or of a measure). A joint singular value
decomposition of {s_l(k) / s_0(k), ds_l(k) / s_0(k)} over k in [beta sigma_min, beta sigma_max]
gives R degree profiles c_r(l) (:class:`KappaLowRank`; R ~ 9-16 at tolerance 1e-12), and

    H(u) = sum_r A_r(kappa~(u)) f_r(u),   D(u) = sum_r A'_r(kappa~(u)) f_r(u),
    f_r = sum_l c_r(l) mu_l.

:class:`LowRankPoints` uses this for a density given at weighted source points (the cells of the
finite-volume scheme) and a velocity needed at arbitrary target points (its face midpoints):

1. mu = the coefficients, to the degree L beyond which s_l(beta sigma_max) / s_0 < 1e-17, of the
   measure sum_j a_j delta_{y_j} (one adjoint general synthesis, ``ducc0``);
2. the R fields f_r on a Gauss-Legendre grid of degree L_H = L + (degree of the weights
   A_r(kappa~(u)), set by the anisotropy of B) + 16, where H and D are formed pointwise and
   analysed exactly (their degree is below L_H to 1e-15 of their size);
3. H, D and grad H at the targets' image points u(x) (general syntheses), then

       N / Z = V [u D + (grad H - (D - H) grad kappa~) / kappa] / H

   (grad H - (D - H) grad kappa~ is the gradient at fixed kappa, since
   d s_l / d kappa = ds_l - s_l).

The cost does not depend on the number of cells beyond the two general transforms, which are
linear in the number of points: R small syntheses, two analyses and four general syntheses of
degree L_H, against n_targets x n_sources exponentials for direct quadrature.

Where H is tiny (below ``log_domain_below`` of its maximum, default ``GUARD_RELATIVE_Z``, or
<= 0) the spectral value has few significant digits: its absolute error is ~1e-16-1e-14 of the
largest H, which the heaviest cells set. Those rows are recomputed in the log domain by **peeling**:

4. the cells with mass above ``PEEL_FACTOR``^j of the largest mass (j = 1, 2, ...) are taken off
   the density; the rest, the *tail*, gets its own spectral H_t, N_t (steps 1-3). Their
   absolute error is ~1e-14 of the tail's mass, not of the whole density's (measured in
   tests/interaction/test_lowrank_points.py), so a small row whose H_t is at least
   ``log_domain_below`` of the tail's mass is as accurate as a row of step 3 at that level
   (~1e-8 at 1e-6), and its sums are
   e^kappa (H_t, N_t) plus the exact log-sum-exp sums over the peeled cells
   (:func:`~spheredens.interaction.pruned_logsumexp_sums`), added in the log domain;
5. rows still small after ``peel_levels`` levels, or once ``PEEL_MAX_SHARE`` of the cells are
   peeled, or all small rows when they are too few for peeling to pay (fewer than
   ``PEEL_MIN_PAIRS`` rows x cells) or peeling is off (``peel_levels = 0``), take the pruned
   direct log-sum-exp sum over all cells, as ``direct_pruned`` computes them.

Nothing is clipped or floored: where Z e^-kappa underflows, the sums stay right in the log
domain. Step 4 is what keeps a concentrated density affordable: its small rows see the tail, not
the few heavy cells, so each level costs one spectral evaluation and a direct sum over the few
peeled cells, where step 5 sums over ~20% of all cells for each row (measured on
docs/numerics.md).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .._lazy import ducc0
from .._types import Array
from ..geometry import tangent_project
from ..grids import GaussGrid
from ..grids._sphere_gauss import points_to_colat_lon
from ..models import Model
from ._base import PointsEvaluator, register_evaluator
from ._funk_hecke import (
    GENERAL_B_REQUIREMENT,
    GUARD_RELATIVE_Z,
    barycentric_weights,
    chebyshev_log_nodes,
    funk_hecke_multipliers,
    well_conditioned,
)
from ._points import degrees, multiplier_degree
from ._pruned import pruned_logsumexp_sums, tree_logsumexp_sums
from ._quadrature import clip_norm

#: l1 error of the low-rank multipliers, relative to s_0(kappa), on the sampled kappa range
LOWRANK_TOLERANCE = 1e-12
#: H = sum_r A_r(kappa~(u)) f_r(u) has degree up to lmax + the degree of the weights
#: A_r(kappa~(u)) (set by the anisotropy of B: ~50 for cond(B) = 2.3, ~70 for 3); grids that
#: carry H carry degree max(lmax, weights' degree at WEIGHT_CUTOFF) + EXTRA_DEGREES
EXTRA_DEGREES = 16
#: peeling (module docstring, step 4): the cells above PEEL_FACTOR^j of the largest mass go at
#: level j, for at most PEEL_LEVELS levels
PEEL_FACTOR = 1e-3
PEEL_LEVELS = 12
#: peeling stops once this share of the cells is peeled (the direct sum costs as much then)
PEEL_MAX_SHARE = 0.5
#: fewer (small rows x cells) than this: the direct sum is cheaper than a spectral evaluation
#: (benchmarks/bench_log_domain_peeling.py: peeling 2x slower at nlat = 32, 2-5x faster at 64)
PEEL_MIN_PAIRS = 2e7
#: ``attention_average_with_atoms``: a peel level that certifies less than this share of the
#: rows it took ends the peeling (the rest go to the exact sums, which the tree makes cheap).
#: 0 by default (every level tried): which is cheaper depends on the case (measured with the
#: two atoms' hybrid: 0.25 saves 4x late at beta = 1000 on 128 rings, costs 3x at beta = 300 on
#: 256 rings, where the second and third levels certify most rows after a first of 5%)
PEEL_MIN_GAIN = 0.0
WEIGHT_CUTOFF = 1e-15
#: Chebyshev nodes in log kappa for the weights A_r(kappa), A'_r(kappa)
WEIGHT_NODES = 64


def lowrank_multipliers(
    lmax: int,
    kappa_min: float,
    kappa_max: float,
    tol: float = LOWRANK_TOLERANCE,
    samples: int = 400,
) -> tuple[Array, float]:
    """Degree profiles c_r(l) (R, lmax + 1), orthonormal, with
    s_l(k) ~ sum_r (sum_l' s_l'(k) c_r(l')) c_r(l) and the same for ds_l, to an l1 error over l
    below ``tol`` s_0(k) at ``samples`` log-spaced k in [kappa_min, kappa_max]; and that error."""
    l = np.arange(lmax + 1.0)
    ks = np.geomspace(kappa_min, kappa_max, samples)
    rows = [np.stack(funk_hecke_multipliers(l, k)) for k in ks]
    s = np.array(rows)  # (samples, 2, lmax + 1)
    m = np.concatenate([s[:, 0] / s[:, 0, :1], s[:, 1] / s[:, 0, :1]])
    _, _, vt = np.linalg.svd(m, full_matrices=False)
    err = math.inf
    for r in range(1, len(vt) + 1):
        p = vt[:r]
        err = float(np.abs(m - (m @ p.T) @ p).sum(axis=1).max())
        if err < tol:
            return p, err
    return vt, err


class KappaLowRank:
    """The low-rank factorization s_l(k) ~ sum_r A_r(k) c_r(l), ds_l(k) ~ sum_r A'_r(k) c_r(l)
    for the kappa range [beta sigma_min(B), beta sigma_max(B)] of ``model`` and degrees <= lmax
    (module docstring). ``profiles`` are the c_r(l) (R, lmax + 1); :meth:`weights` gives
    A_r, A'_r at any kappa of the range (exact at 64 Chebyshev nodes in log kappa, barycentric
    interpolation between them)."""

    def __init__(self, model: Model, lmax: int, tol: float = LOWRANK_TOLERANCE) -> None:
        self.B = np.asarray(model.kernel.B, dtype=float)
        self.beta = model.beta
        sigma = model.kernel.singular_values
        lo, hi = self.beta * sigma[-1] * (1 - 1e-12), self.beta * sigma[0] * (1 + 1e-12)
        self.profiles, self.error = lowrank_multipliers(lmax, lo, hi, tol)
        self.rank = len(self.profiles)
        self._inv_b = np.linalg.inv(self.B)
        self._nodes = chebyshev_log_nodes(
            lo, hi, WEIGHT_NODES
        )  # hi > lo: the range is widened above
        l = np.arange(lmax + 1.0)
        at_nodes = np.array([funk_hecke_multipliers(l, k) for k in self._nodes])  # (p, 2, lmax + 1)
        self._node_a, self._node_a_d = (
            at_nodes[:, 0] @ self.profiles.T,
            at_nodes[:, 1] @ self.profiles.T,
        )

    def kappa_of_image(self, u: Array) -> Array:
        """kappa~(u) = beta / |B^{-T} u| for unit vectors u (..., 3)."""
        return self.beta / np.linalg.norm(u @ self._inv_b, axis=-1)

    def grad_kappa_of_image(self, u: Array) -> Array:
        """The tangent gradient of kappa~ at unit vectors u (n, 3): kappa~ = beta (u^T A u)^(-1/2)
        with A = B^-1 B^-T, so grad = -beta (u^T A u)^(-3/2) A u, projected on the tangent plane."""
        a = self._inv_b @ self._inv_b.T
        quad = np.einsum("ni,ij,nj->n", u, a, u)
        grad = -self.beta * quad[:, None] ** -1.5 * (u @ a)
        return grad - np.sum(grad * u, axis=-1, keepdims=True) * u

    def weights(self, kappa: Array) -> tuple[Array, Array]:
        """A_r(kappa), A'_r(kappa) (R, len(kappa))."""
        w = barycentric_weights(self._nodes, np.ravel(kappa))
        return (w @ self._node_a).T, (w @ self._node_a_d).T

    def weight_degree(self) -> int:
        """The degree beyond which every A_r(kappa~(u)) has spherical-harmonic coefficients below
        ``WEIGHT_CUTOFF`` times the largest (relative to max s_0): analysed on Gauss grids of
        degree 63, 127, 255 until one holds it with room to spare."""
        for degree in (63, 127, 255):
            g = GaussGrid(degree)
            a, _ = self.weights(self.kappa_of_image(g.points.reshape(-1, 3)))
            a /= np.abs(a).max()
            top = np.zeros(degree + 1)
            for r in range(self.rank):
                np.maximum.at(top, g.l.astype(int), np.abs(g.analys(a[r].reshape(g.shape))))
            above = np.flatnonzero(top > WEIGHT_CUTOFF)
            found = int(above[-1]) if above.size else 0
            if found < degree - 8:
                return found
        return found


@register_evaluator
class LowRankPoints(PointsEvaluator):
    """Velocity at target points for a density at weighted source points (finite-volume cells)
    and any invertible B (condition number <= 1e3): Funk-Hecke multipliers of low rank in
    kappa (module docstring). Agrees with direct quadrature to ~1e-13 of ||V|| where the scaled
    partition function is near its maximum; rows where it is below ``GUARD_RELATIVE_Z`` of its
    maximum are computed by pruned direct log-sum-exp quadrature (``fallback_fraction``: their
    share at the last call)."""

    name = "lowrank_points"
    domains = ("sphere",)
    inputs = ("values",)
    priority = 15

    description = (
        "sphere, density at points (fv cells): Funk-Hecke multipliers of low rank in "
        "kappa = beta |B^T x|, general syntheses at the targets (B invertible, cond <= 1e3)"
    )
    requirement = GENERAL_B_REQUIREMENT
    structure = staticmethod(well_conditioned)

    def setup(
        self, *, tol: float = LOWRANK_TOLERANCE, epsilon: float = 1e-13, nthreads: int = 1
    ) -> None:
        model = self.model
        self.fallback_fraction = 0.0
        #: rows with e^-kappa Z below this fraction of its maximum are summed in the log domain
        #: (the spectral value's absolute error is ~1e-16 of the maximum: velocity errors of
        #: ~1e-10 at 1e-6, ~1e-7 at 1e-9); the fv option ``log_domain_below`` sets it
        self.log_domain_below = GUARD_RELATIVE_Z
        #: levels of peeling before a small row takes the full direct sum (0: no peeling)
        self.peel_levels = PEEL_LEVELS
        #: fewer small rows x cells than this: no peeling (``PEEL_MIN_PAIRS``)
        self.peel_min_pairs = PEEL_MIN_PAIRS
        #: ``attention_average_with_atoms`` stops peeling after a level that certified less
        #: than this share of its rows (``PEEL_MIN_GAIN``; 0: every level is tried)
        self.peel_min_gain = PEEL_MIN_GAIN
        #: share of the rows at the last call that took the full direct log-sum-exp sum
        self.direct_fraction = 0.0
        self._epsilon, self._nthreads = epsilon, nthreads
        if model.beta == 0.0:
            return
        if not well_conditioned(model):
            raise ValueError(f"lowrank_points {GENERAL_B_REQUIREMENT}")
        B = np.asarray(model.kernel.B, dtype=float)
        sigma = model.kernel.singular_values
        self.lmax = multiplier_degree(model.beta * sigma[0])
        self.lowrank = KappaLowRank(model, self.lmax, tol)
        self.weight_degree = self.lowrank.weight_degree()
        self.grid_degree = max(self.lmax, self.weight_degree) + EXTRA_DEGREES
        # longitudes: an FFT-friendly count >= 2 L_H + 2 (2 x 103 longitudes made every
        # synthesis 6x slower)
        self._nt, self._nph = (
            self.grid_degree + 1,
            int(ducc0.fft.good_size(2 * self.grid_degree + 2, True)),
        )
        self._profiles = np.ascontiguousarray(
            self.lowrank.profiles[:, degrees(self.lmax).astype(int)]
        )
        # the Gauss-Legendre grid (ducc0 "GL": theta_k ascending, phi_j = 2 pi j / nph)
        x, _ = np.polynomial.legendre.leggauss(self._nt)
        theta = np.arccos(-x)
        phi = 2.0 * np.pi * np.arange(self._nph) / self._nph
        st = np.sin(theta)[:, None]
        u_grid = np.stack(
            np.broadcast_arrays(
                st * np.cos(phi), st * np.sin(phi), np.cos(theta)[:, None] + 0 * phi
            ),
            axis=-1,
        ).reshape(-1, 3)
        self._a_both = np.ascontiguousarray(
            np.stack(self.lowrank.weights(self.lowrank.kappa_of_image(u_grid)))
        )
        l_h = degrees(self.grid_degree)
        self._l_grad = np.sqrt(l_h * (l_h + 1.0))
        self._source_loc = np.ascontiguousarray(points_to_colat_lon(self.sources))
        # the targets' image points, kappa there, and the assembly of N e^-kappa from
        # (H, D, dH/dtheta, dH/dphi / sin theta) at them
        bx = self.targets @ B
        r = np.linalg.norm(bx, axis=-1)
        self._kappa = beta_r = model.beta * r
        u = bx / r[:, None]
        loc = np.ascontiguousarray(points_to_colat_lon(u))
        self._target_loc = loc
        th, ph = loc[:, 0], loc[:, 1]
        e_t = np.stack([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)], axis=-1)
        e_p = np.stack([-np.sin(ph), np.cos(ph), np.zeros_like(ph)], axis=-1)
        grad_kappa = self.lowrank.grad_kappa_of_image(u)
        k = beta_r[:, None]
        # N e^-kappa = V sum_f field_f vectors_f, fields (H, D, dH/dtheta, dH/dphi / sin)
        self._vectors = np.array([grad_kappa / k, u - grad_kappa / k, e_t / k, e_p / k])
        # the log-domain rows: the targets' queries beta B^T x
        self._query = model.kernel.query(self.targets)
        self._vy = self.sources @ model.V.T

    def attributes(self) -> dict[str, Any]:
        if self.model.beta == 0.0:
            return {}
        return {
            "lowrank_rank": self.lowrank.rank,
            "lowrank_error": self.lowrank.error,
            "interaction_lmax": self.lmax,
            "lowrank_weight_degree": self.weight_degree,
            "lowrank_grid_degree": self.grid_degree,
            "log_domain_below": self.log_domain_below,
            "log_domain_peel_levels": self.peel_levels,
        }

    def fields(self, masses: Array, rows: Array | None = None) -> Array:
        """(H, D, dH/dtheta, dH/dphi / sin theta) at the targets' image points (only at the targets
        ``rows`` when given), shape (4, n), for the source masses a_j (module docstring)."""
        sht, nthreads, eps = ducc0.sht, self._nthreads, self._epsilon
        mu = sht.adjoint_synthesis_general(
            map=np.ascontiguousarray(masses, dtype=float)[None, :],
            spin=0,
            lmax=self.lmax,
            loc=self._source_loc,
            epsilon=eps,
            nthreads=nthreads,
        )[0]
        rank = self.lowrank.rank
        f = np.empty((rank, self._nt * self._nph))
        for r in range(rank):
            f[r] = sht.synthesis_2d(
                alm=(self._profiles[r] * mu)[None, :],
                spin=0,
                lmax=self.lmax,
                geometry="GL",
                ntheta=self._nt,
                nphi=self._nph,
                nthreads=nthreads,
            ).reshape(-1)
        hd = np.einsum("krp,rp->kp", self._a_both, f).reshape(2, self._nt, self._nph)
        alm = [
            sht.analysis_2d(
                map=m[None], spin=0, lmax=self.grid_degree, geometry="GL", nthreads=nthreads
            )[0]
            for m in hd
        ]
        loc = self._target_loc if rows is None else np.ascontiguousarray(self._target_loc[rows])
        out = np.empty((4, len(loc)))
        for k in range(2):
            out[k] = sht.synthesis_general(
                alm=alm[k][None],
                spin=0,
                lmax=self.grid_degree,
                loc=loc,
                epsilon=eps,
                nthreads=nthreads,
            )[0]
        out[2:] = sht.synthesis_general(
            alm=np.stack([self._l_grad * alm[0], np.zeros_like(alm[0])]),
            spin=1,
            lmax=self.grid_degree,
            loc=loc,
            epsilon=eps,
            nthreads=nthreads,
        )
        return out

    def attention_average(self, rho: Array) -> Array:
        """N / Z (``sa``) or N (``usa``) at the targets for one density at the sources (values;
        negative values are clipped), shape (n_targets, 3)."""
        a = np.where(rho > 0.0, rho, 0.0) * self.weight
        model = self.model
        if model.beta == 0.0:
            avg = model.V @ (a @ self.sources)
            if model.kind.normalized:
                avg = avg / a.sum()
            return np.broadcast_to(avg, self.targets.shape)
        h, n = self.scaled_sums(a)
        if not model.kind.normalized:
            with np.errstate(
                over="ignore", invalid="ignore"
            ):  # usa at large beta: inf, caught later
                return n * np.exp(self._kappa)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):  # h <= 0: rows redone below
            out = n / h[:, None]
        small = np.flatnonzero((h < self.log_domain_below * h.max()) | ~(h > 0.0))
        self.fallback_fraction = self.guarded_fraction = small.size / h.size
        self.direct_fraction = 0.0
        if small.size:
            with np.errstate(divide="ignore"):
                log_a = np.log(a)
            rest = self._peeled_rows(a, log_a, small, out)
            self.direct_fraction = rest.size / h.size
            if rest.size:
                z, num, _, _ = pruned_logsumexp_sums(
                    self._query[rest], self.sources, log_a, self._vy
                )
                out[rest] = num / np.where(z > 0.0, z, np.inf)[:, None]
        return clip_norm(out, self._v_norm)

    def scaled_sums(self, masses: Array, rows: Array | None = None) -> tuple[Array, Array]:
        """(e^-kappa Z, e^-kappa V N) at the targets (or at the targets ``rows``) for the source
        masses a_j: the spectral sums of steps 1-3 (module docstring), shapes (n,) and (n, 3)."""
        fields = self.fields(masses, rows)
        vectors = self._vectors if rows is None else self._vectors[:, rows]
        return fields[0], np.einsum("fn,fnd->nd", fields, vectors) @ self.model.V.T

    def _peel_levels(self, a: Array):
        """The levels of step 4 of the module docstring: (peeled cells, the tail's masses) with
        the cells above a.max() PEEL_FACTOR^level peeled, level = 1, 2, ..., ``peel_levels``,
        until more than PEEL_MAX_SHARE of the cells are peeled or the tail is empty."""
        peeled = np.zeros(a.size, dtype=bool)
        for level in range(1, self.peel_levels + 1):
            new = ~peeled & (a > a.max() * PEEL_FACTOR**level)
            if not new.any():
                continue
            peeled |= new
            if peeled.mean() > PEEL_MAX_SHARE:
                return
            tail = np.where(peeled, 0.0, a)
            if not tail.any():
                return
            yield peeled, tail

    @staticmethod
    def _combined(log_t: Array, h_t: Array, n_t: Array, sums: tuple) -> tuple[Array, Array]:
        """The spectral part (Z = e^log_t, N = e^kappa n_t with h_t = e^-kappa Z) and the exact
        part (``pruned_logsumexp_sums``' z, n, log scale) added over e^s, s the larger log Z:
        (s, N / Z)."""
        z_b, n_b, m_b, _ = sums
        with np.errstate(divide="ignore"):
            log_b = m_b + np.log(z_b)
        s = np.maximum(log_t, log_b)
        w_t, w_b = np.exp(log_t - s), np.exp(log_b - s)
        num = n_t * np.divide(w_t, h_t, out=np.zeros_like(w_t), where=w_t > 0.0)[:, None]
        num += n_b * np.divide(w_b, z_b, out=np.zeros_like(w_b), where=z_b > 0.0)[:, None]
        return s, num / (w_t + w_b)[:, None]

    def _peeled_rows(self, a: Array, log_a: Array, rows: Array, out: Array) -> Array:
        """Step 4 of the module docstring: N / Z into ``out`` for the small ``rows`` that a level
        of peeling makes accurate; returns the rows left for the full direct sum."""
        if rows.size * a.size < self.peel_min_pairs:
            return rows
        for peeled, tail in self._peel_levels(a):
            if rows.size == 0:
                break
            h_t, n_t = self.scaled_sums(tail, rows)  # at the small rows only
            ok = (h_t > 0.0) & (h_t >= self.log_domain_below * tail.sum())
            if not ok.any():
                continue
            done, rows, h_t, n_t = rows[ok], rows[~ok], h_t[ok], n_t[ok]
            cells = np.flatnonzero(peeled)
            # Z and N of the tail (e^kappa (h_t, n_t)) and of the peeled cells (e^M (z_b, n_b)),
            # both over e^s with s the larger log Z; peeled blocks below 2^-60 of the tail's Z
            # are skipped (that Z is known to better than 1e-3 here, hence the margin)
            log_t = self._kappa[done] + np.log(h_t)
            sums = pruned_logsumexp_sums(
                self._query[done],
                self.sources[cells],
                log_a[cells],
                self._vy[cells],
                log_lower=log_t - 1e-3,
            )
            out[done] = self._combined(log_t, h_t, n_t, sums)[1]
        return rows

    def attention_average_with_atoms(self, rho: Array, atoms: Array, log_m: Array) -> Array:
        """N / Z (``sa``) at the targets for the density ``rho`` at the sources (values, as
        :meth:`attention_average`) plus atoms at the unit vectors ``atoms`` (n, 3) with log
        masses ``log_m`` (any depth), shape (n_targets, 3).

        The atoms' sums are always the exact pruned log-sum-exp sums (they may hold almost all
        the mass: clusters narrower than a cell carried as particles); the sources' sums are
        the spectral ones, with the certificate of :meth:`attention_average` taken against the
        total: a row is kept where e^-kappa times the larger of the two parts' Z reaches
        ``log_domain_below`` of the spectral part's mass (that part's absolute error is ~1e-14
        of its mass, so N / Z is right to ~1e-14 / log_domain_below of ||V||). The other rows
        are redone with the heaviest sources peeled off into the exact part (the levels of
        step 4), and what is left after ``peel_levels`` levels (or when fewer rows x sources
        than ``peel_min_pairs`` are left, or after a level that certified less than
        ``peel_min_gain`` of its rows) by the full direct sums over the occupied sources
        and the atoms. The exact sums are ``_pruned.tree_logsumexp_sums`` (certified as the
        pruned sums, cheaper where each row sees a small part of a deep tail; the atoms in any
        order). ``direct_fraction``: the share of rows
        that took the full sums."""
        if not self.model.kind.normalized or self.model.beta == 0.0:
            raise ValueError(
                "attention_average_with_atoms is for sa at beta > 0 (the atoms' sums are "
                "log-sum-exp ratios); use attention_average with the atoms on the sources"
            )
        a = np.where(rho > 0.0, rho, 0.0) * self.weight
        with np.errstate(divide="ignore"):
            log_a = np.log(a)
        atoms = np.asarray(atoms, dtype=float).reshape(-1, 3)
        log_m = np.asarray(log_m, dtype=float).ravel()
        vy_atoms = atoms @ self.model.V.T

        def exact_sums(rows, cells, log_lower=None):
            return tree_logsumexp_sums(
                self._query[rows],
                np.concatenate([self.sources[cells], atoms]),
                np.concatenate([log_a[cells], log_m]),
                np.concatenate([self._vy[cells], vy_atoms]),
                log_lower=log_lower,
            )

        out = np.empty((len(self.targets), 3))
        rows = np.arange(len(self.targets))
        levels = [(np.zeros(a.size, dtype=bool), a)] if a.any() else []
        for level, (peeled, tail) in enumerate(itertools.chain(levels, self._peel_levels(a))):
            if level and rows.size * a.size < self.peel_min_pairs:
                break  # the direct sums are cheaper than a spectral evaluation
            h, n = self.scaled_sums(tail, rows if level else None)
            kappa = self._kappa[rows]
            with np.errstate(divide="ignore", invalid="ignore"):
                log_t = np.where(h > 0.0, kappa + np.log(np.where(h > 0.0, h, 1.0)), -np.inf)
            top, average = self._combined(
                log_t, h, n, exact_sums(rows, np.flatnonzero(peeled), log_t - 1e-3)
            )
            ok = top - kappa >= math.log(self.log_domain_below * tail.sum())
            out[rows[ok]] = average[ok]
            rows = rows[~ok]
            if rows.size == 0 or (level and ok.mean() < self.peel_min_gain):
                break
        self.direct_fraction = rows.size / len(self.targets)
        if rows.size:
            z, num, _, _ = exact_sums(rows, a > 0.0)
            out[rows] = num / z[:, None]
        return clip_norm(out, self._v_norm)

    def vectors(self, rho: Array) -> Array:
        """Tangent velocity X[rho] at the targets, shape (n_xi, n_targets, 3), for source values
        ``rho`` of shape (n_xi, n_sources)."""
        return np.stack(
            [tangent_project(self.targets, self.attention_average(r)) for r in np.atleast_2d(rho)]
        )
