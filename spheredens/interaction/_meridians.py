"""General invertible B on S^2 at the cost of a few transforms.

With kappa(x) = beta |B^T x| and the image point u(x) = B^T x / |B^T x|, the scaled
partition function is e^{-kappa(x)} Z(x) = F~_{kappa(x)}(u(x)), F~_kappa = sum_l s_l(kappa) rho_l
(scaled Funk-Hecke multipliers s_l, rho_l the degree-l part of rho). Two facts make this cheap:

1. **kappa is a function of u alone**: kappa~(u) = beta / |B^{-T} u| equals kappa(x) at
   u = u(x). So H(u) = F~_{kappa~(u)}(u), D(u) (the same with the kappa-derivatives ds_l) are
   smooth functions on the sphere of u, and e^{-kappa} Z = H(u(x)), e^{-kappa} dZ/dkappa = D(u(x)).
   A joint singular value decomposition of {s_l(k) / s_0(k), ds_l(k) / s_0(k)} over
   k in [beta sigma_min, beta sigma_max] gives R degree profiles c_r(l) (R ~ 9-16 at
   tolerance 1e-12) with s_l(k) ~ sum_r A_r(k) c_r(l), ds_l(k) ~ sum_r A'_r(k) c_r(l):

       H(u) = sum_r A_r(kappa~(u)) f_r(u),   D(u) = sum_r A'_r(kappa~(u)) f_r(u),
       f_r = sum_l c_r(l) rho_l   (degree <= lmax: R syntheses on a regular grid).

   The gradient at fixed kappa, which N needs, is grad H - (D - H) grad kappa~ (since
   d s_l / d kappa = ds_l - s_l for the scaled multipliers).
2. **The targets lie on known meridians**: u is a linear map followed by normalization, so
   great circles go to great circles. Every meridian of the Gauss grid (a half great circle
   from pole to pole) goes to a half great circle from n' = B^T e_z / |B^T e_z| to -n': a
   meridian of the frame whose pole is n'. After one rotation of rho into that frame
   (``ducc0.sht.rotate_alm``), the N targets lie on nphi known meridians, and the evaluation
   at them is separable:
   - in longitude, exact trigonometric interpolation of the regular grid's rows to the nphi
     meridians (a small matrix product; meridian j + nphi / 2 lies opposite meridian j);
   - in colatitude, along each of the nphi / 2 great circles (a trigonometric polynomial of
     degree <= the grid's), the interpolation of a type-2 non-uniform FFT: upsampling by 2
     with the deconvolution of an "exponential of semicircle" kernel, then a precomputed sparse
     matrix with ``taps`` weights per target. Libraries (``ducc0.nufft``) do one set of points
     per call: 96-192 calls per field cost more than the whole right-hand side here, hence the
     precomputed matrix.

N / Z is then V [u D + (grad H - (D - H) grad kappa~) / kappa] / H, assembled from the four
fields H, D, dH/dphi'', dH/dtheta'' with precomputed coefficients.

Where H is tiny: every spectral evaluation carries an absolute error of about 1e-14 of the
largest H, so where H < ``GUARD_RELATIVE_Z`` of its maximum (or H <= 0) those rows are
recomputed by direct log-sum-exp quadrature on the grid (certified pruning of source blocks,
:func:`~spheredens.interaction.pruned_logsumexp_sums`), exactly as the direct evaluator computes
them: the velocity there stays right in the log domain instead of being clipped.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sparse
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation

from .._lazy import ducc0
from .._types import Array
from ..grids import GaussGrid
from ..grids._shtns import make_sht, rings_at_least
from ..models import Model
from ._base import Layout, register_evaluator
from ._funk_hecke import (
    GENERAL_B_REQUIREMENT,
    GUARD_RELATIVE_Z,
    _SphereEvaluator,
    rotation_euler_zyz,
    well_conditioned,
)
from ._lowrank import EXTRA_DEGREES, LOWRANK_TOLERANCE, KappaLowRank
from ._pruned import pruned_logsumexp_sums
from ._quadrature import clip_norm

Coefficients = NDArray[np.complex128]

#: interpolation weights per target along a great circle, and the upsampling factor
TAPS = 13
UPSAMPLING = 2.0


def fft_friendly_rings(minimum: int) -> int:
    """The smallest even nt >= minimum whose 2 nt (the regular grid's longitudes, the great
    circles' samples) has no prime factor above 5: FFTs of lengths with a large prime factor
    (2 x 74 = 4 x 37) made the syntheses 3x slower."""
    nt = int(minimum) + int(minimum) % 2
    while True:
        m = 2 * nt
        for q in (2, 3, 5):
            while m % q == 0:
                m //= q
        if m == 1:
            return nt
        nt += 2


def regular_grid_rings(lmax_h: int, width: int | None = None) -> int:
    """Rings nt of the regular grid (nt x 2 nt) on which the multipliers' fields of degree
    ``lmax_h`` are synthesized: at least lmax_h + 1 (the fields are sampled exactly), at least
    what shtns accepts with SIMD vectors of ``width`` doubles (default: the widest, so the grid
    is the same on every CPU; more rings only sample the same fields more finely),
    FFT-friendly."""
    return fft_friendly_rings(rings_at_least(lmax_h + 1, width))


def rotation_to_pole(n: Array) -> Array:
    """A rotation Q with Q n = e_z."""
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(n, z)
    s, c = float(np.linalg.norm(axis)), float(n @ z)
    if s < 1e-15:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    return Rotation.from_rotvec(axis / s * math.atan2(s, c)).as_matrix()


def es_kernel(taps: int, upsampling: float):
    """The "exponential of semicircle" kernel psi(z) = exp(b (sqrt(1 - z^2) - 1)) on |z| < 1 of
    type-2 non-uniform FFTs, with its shape parameter for ``taps`` points and ``upsampling``."""
    b = math.pi * taps * (1.0 - 0.5 / upsampling) * 0.976

    def psi(z: Array) -> Array:
        z = np.asarray(z, dtype=float)
        inside = np.abs(z) < 1.0
        return np.where(
            inside, np.exp(b * (np.sqrt(np.where(inside, 1.0 - z * z, 0.0)) - 1.0)), 0.0
        )

    return psi


@register_evaluator
class LowRankMeridianInteraction(_SphereEvaluator):
    """Velocity for a general invertible B at the cost of a few transforms (module docstring):
    Funk-Hecke multipliers of low rank in kappa, evaluated along the images of the grid's
    meridians. Agrees with direct quadrature to ~1e-13 of the largest scaled partition function;
    rows where that function is below ``GUARD_RELATIVE_Z`` of its maximum are computed by direct
    log-sum-exp quadrature."""

    name = "lowrank_meridian"
    domains = ("sphere",)
    inputs = ("coefficients",)
    priority = 15

    description = (
        "sphere: Funk-Hecke multipliers of low rank in kappa = beta |B^T x|, evaluated "
        "along the images of the grid's meridians (B invertible, cond <= 1e3)"
    )
    requirement = GENERAL_B_REQUIREMENT
    structure = staticmethod(well_conditioned)

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "LowRankMeridianInteraction":
        if layout.targets is not layout.sources:
            raise ValueError("lowrank_meridian evaluates at the points of its own Gauss grid only")
        return cls(model, layout.sources)

    def __init__(
        self,
        model: Model,
        grid: GaussGrid,
        *,
        tol: float = LOWRANK_TOLERANCE,
        extra_degrees: int = EXTRA_DEGREES,
        taps: int = TAPS,
        upsampling: float = UPSAMPLING,
    ) -> None:
        super().__init__(model, grid)
        self.fallback_fraction = 0.0
        if model.beta == 0.0:
            return
        B = np.asarray(model.kernel.B, dtype=float)
        if not well_conditioned(model):
            raise ValueError(f"lowrank_meridian {GENERAL_B_REQUIREMENT}")
        beta = model.beta
        self.lowrank = KappaLowRank(model, grid.lmax, tol)
        self.rank, self.lowrank_error = self.lowrank.rank, self.lowrank.error
        self._c_lm = np.ascontiguousarray(self.lowrank.profiles[:, grid.l.astype(int)])
        # the frame whose pole is the image of the grid's pole
        pole = B.T @ np.array([0.0, 0.0, 1.0])
        self._q = rotation_to_pole(pole / np.linalg.norm(pole))
        self._euler = rotation_euler_zyz(self._q)  # coefficients of rho(Q^T z)
        self.weight_degree = self.lowrank.weight_degree()
        self._regular_grid(B, beta, lmax_h=max(grid.lmax, self.weight_degree) + extra_degrees)
        self._targets(B, beta, taps, upsampling)
        self._assembly()
        # the log-domain rows: targets' queries beta B^T x, sources the grid points
        self._query = model.kernel.query(grid.points.reshape(-1, 3))
        self._sources = grid.points.reshape(-1, 3)
        self._vy = self._sources @ model.V.T

    def attributes(self) -> dict[str, Any]:
        if self.model.beta == 0.0:
            return {}
        return {
            "lowrank_rank": self.rank,
            "lowrank_error": self.lowrank_error,
            "lowrank_weight_degree": self.weight_degree,
            "lowrank_grid_degree": self._nt - 1,
        }

    # -- set-up -----------------------------------------------------------------------------
    def _regular_grid(self, B: Array, beta: float, lmax_h: int) -> None:
        """The regular grid (theta_k = (k + 1/2) pi / nt, nph = 2 nt) of the rotated frame on
        which H and D are formed, and the weights A_r(kappa~(u)), A'_r(kappa~(u)) there."""
        lmax = self.grid.lmax
        self._nt = regular_grid_rings(lmax_h)
        self._nph = 2 * self._nt
        self._sh = make_sht(lmax, self._nt, self._nph, grid="regular", nthreads=self.grid.nthreads)
        theta = np.arccos(np.asarray(self._sh.cos_theta))
        phi = 2.0 * np.pi * np.arange(self._nph) / self._nph
        st, ct = np.sin(theta)[:, None], np.cos(theta)[:, None]
        rotated = np.stack(
            np.broadcast_arrays(st * np.cos(phi), st * np.sin(phi), ct + 0 * phi), axis=-1
        )
        u = (rotated @ self._q).reshape(-1, 3)  # Q^T u'': points of the original frame
        # (2, R, P): the weights of H and of D at the regular grid's points
        self._a_both = np.ascontiguousarray(
            np.stack(self.lowrank.weights(self.lowrank.kappa_of_image(u)))
        )
        self._f = np.zeros((self.rank, self._nt, self._nph))

    def _targets(self, B: Array, beta: float, taps: int, upsampling: float) -> None:
        """Where the grid's points land in the rotated frame, the longitude interpolation to
        their meridians and the sparse colatitude interpolation along the great circles."""
        g = self.grid
        bx = g.points @ B
        r = np.linalg.norm(bx, axis=-1)
        self._kappa = (beta * r).reshape(-1)
        self._u = (bx / r[..., None]).reshape(-1, 3)
        rotated = self._u @ self._q.T
        theta = np.arccos(np.clip(rotated[:, 2], -1.0, 1.0)).reshape(g.shape)
        phi = np.arctan2(rotated[:, 1], rotated[:, 0]).reshape(g.shape)
        # each grid meridian lands on one meridian of the rotated frame (its equator point tells
        # which: exactly on it up to round-off)
        phi_j = phi[g.nlat // 2]
        off = np.abs(np.angle(np.exp(1j * (phi - phi_j[None, :])))).max()
        half = g.nphi // 2
        opposite = np.abs(np.angle(np.exp(1j * (phi_j[half:] - phi_j[:half] - np.pi)))).max()
        if off > 1e-9 or opposite > 1e-9:  # cannot happen for invertible B: a broken invariant
            raise RuntimeError(
                f"the grid's meridians do not map to meridians ({off:.1e}, {opposite:.1e})"
            )
        self._half = half
        # longitude: rfft rows of the regular grid -> values (and d/dphi) at phi_j, j < half;
        # even modes give the part common to phi_j and phi_j + pi, odd modes the part that flips
        nph = self._nph
        k = np.arange(nph // 2 + 1.0)
        wk = np.where(k == 0, 1.0, 2.0)
        wk[-1] = 0.0  # the Nyquist mode of a band-limited row is zero
        e = np.exp(1j * np.outer(k, phi_j[:half])) * wk[:, None] / nph
        ed = 1j * k[:, None] * e
        self._lon = {}
        for name, m in (("value", e), ("derivative", ed)):
            for parity in (0, 1):  # rows [Re c_k, Im c_k] -> Re(sum_k c_k m_kj), k of one parity
                rows = m[parity::2]
                self._lon[f"{name}{parity}"] = np.ascontiguousarray(
                    np.vstack([rows.real, -rows.imag])
                )
        # colatitude: along great circle c (meridian c, then meridian c + half downwards) the
        # regular grid's samples sit at t_m = (m + 1/2) h, m < 2 nt, h = pi / nt
        nt = self._nt
        n_circle = 2 * nt
        h = np.pi / nt
        n_up = int(round(upsampling * n_circle))
        n_up += n_up % 2
        self._n_up, self._taps = n_up, taps
        t = np.where(np.arange(g.nphi)[None, :] < half, theta, 2.0 * np.pi - theta)
        circle = np.broadcast_to(np.arange(g.nphi)[None, :] % half, theta.shape).reshape(-1)
        s = (t - h / 2).reshape(-1)  # samples at m h
        step = 2.0 * np.pi / n_up
        psi = es_kernel(taps, upsampling)
        width = taps * step / 2.0
        first = np.ceil(s / step - taps / 2.0).astype(int)
        index = first[:, None] + np.arange(taps)[None, :]
        values = psi((s[:, None] - index * step) / width)
        self._row = n_up + taps  # each circle's upsampled samples, padded so no index wraps
        cols = circle[:, None] * self._row + np.mod(first, n_up)[:, None] + np.arange(taps)[None, :]
        self._interp = sparse.csr_matrix(
            (values.reshape(-1), cols.reshape(-1), np.arange(0, values.size + 1, taps)),
            shape=(len(s), half * self._row),
        )
        # deconvolution by the kernel's Fourier transform (Gauss-Legendre quadrature of psi)
        xg, wg = np.polynomial.legendre.leggauss(200)
        kk = np.arange(n_circle // 2 + 1.0)
        psi_hat = (np.cos(np.outer(kk, xg * width)) * psi(xg)[None, :]) @ wg * width
        deconv = step / psi_hat / n_circle
        deconv[-1] = 0.0
        self._deconv, self._deconv_d = deconv, 1j * kk * deconv
        # work arrays of :meth:`fields` (the upsampled spectra stay zero beyond the circle's)
        self._hd = np.empty((2, nt * self._nph))
        self._circles = np.empty((half, n_circle, 3))
        self._up = np.zeros((half, n_up // 2 + 1, 4), dtype=complex)
        self._samples = np.empty((half, self._row, 4))
        # the rotated frame's unit vectors at the targets, in the original frame
        st, ct = np.sin(theta).reshape(-1), np.cos(theta).reshape(-1)
        sp, cp = np.sin(phi).reshape(-1), np.cos(phi).reshape(-1)
        self._e_t = np.stack([ct * cp, ct * sp, -st], axis=-1) @ self._q
        self._e_p = np.stack([-sp, cp, np.zeros_like(sp)], axis=-1) @ self._q
        self._inv_sin = 1.0 / st
        # along the circle t = 2 pi - theta on the second half: d/dt = -d/dtheta
        self._sign_t = np.broadcast_to(
            np.where(np.arange(g.nphi) < half, 1.0, -1.0)[None, :], theta.shape
        ).reshape(-1)

    def _assembly(self) -> None:
        """grad kappa~ at the targets, and the coefficients of N / Z along (e_theta, e_phi)
        of the grid in the four fields (H, D, dH/dphi'', dH/dt)."""
        g = self.grid
        u = self._u
        self._grad_kappa = self.lowrank.grad_kappa_of_image(u)
        kappa = self._kappa[:, None]
        # N e^-kappa = V [u D + (e_t sign dH/dt + e_p dH/dphi / sin - (D - H) grad kappa~) / kappa]
        # (4, N, 3): N e^-kappa = V sum_f field_f vectors_f at each target
        self._vectors = np.array(
            [
                self._grad_kappa / kappa,
                u - self._grad_kappa / kappa,
                self._e_p * (self._inv_sin / self._kappa)[:, None],
                self._e_t * (self._sign_t / self._kappa)[:, None],
            ]
        )
        frames = np.stack(
            [g.e_theta.reshape(-1, 3) @ self.model.V, g.e_phi.reshape(-1, 3) @ self.model.V]
        )
        # (2, 4, N): component c of N / Z at target n is sum_f coef[c, f, n] field_f[n] / H[n]
        self._coef = np.einsum("cnd,fnd->cfn", frames, self._vectors)

    # -- evaluation -------------------------------------------------------------------------
    def fields(self, rho_c: Coefficients) -> Array:
        """(H, D, dH/dphi'', dH/dt) at the grid's points, shape (N, 4) (module docstring)."""
        lmax, nt, half = self.grid.lmax, self._nt, self._half
        rotated = ducc0.sht.rotate_alm(np.ascontiguousarray(rho_c), lmax, *self._euler)
        f_c = self._c_lm * rotated[None, :]
        f = self._f
        for r in range(self.rank):
            self._sh.SH_to_spat(f_c[r], f[r])
        flat = f.reshape(self.rank, -1)
        hd = self._hd
        np.einsum("krp,rp->kp", self._a_both, flat, out=hd)
        # longitude: to the meridians phi_j (j < half) and phi_j + pi
        c = ducc0.fft.r2c(hd.reshape(2, nt, self._nph), axes=(2,), forward=True, nthreads=1)
        even, odd = c[..., 0::2], c[..., 1::2]
        x_even = np.concatenate([even.real, even.imag], axis=-1).reshape(2 * nt, -1)
        x_odd = np.concatenate([odd.real, odd.imag], axis=-1).reshape(2 * nt, -1)
        y_even, y_odd = x_even @ self._lon["value0"], x_odd @ self._lon["value1"]
        d_even, d_odd = (
            x_even[:nt] @ self._lon["derivative0"],
            x_odd[:nt] @ self._lon["derivative1"],
        )
        # great circles (half, 2 nt samples in t, fields H, D, dH/dphi)
        circles = self._circles
        circles[:, :nt, :2] = (y_even + y_odd).reshape(2, nt, half).transpose(2, 1, 0)
        circles[:, nt:, :2] = (y_even - y_odd).reshape(2, nt, half)[:, ::-1].transpose(2, 1, 0)
        circles[:, :nt, 2] = (d_even + d_odd).T
        circles[:, nt:, 2] = (d_even - d_odd)[::-1].T
        # colatitude: upsample with the kernel's deconvolution (and d/dt of H), then the sparse
        # interpolation; the field axis last, so that the sparse product reads rows in place
        spectrum = ducc0.fft.r2c(circles, axes=(1,), forward=True, nthreads=1)
        up = self._up
        np.multiply(spectrum, self._deconv[None, :, None], out=up[:, : nt + 1, :3])
        np.multiply(spectrum[..., 0], self._deconv_d[None, :], out=up[:, : nt + 1, 3])
        samples = self._samples
        ducc0.fft.c2r(
            up,
            axes=(1,),
            lastsize=self._n_up,
            forward=False,
            inorm=0,
            nthreads=1,
            out=samples[:, : self._n_up],
        )
        samples[:, self._n_up :] = samples[:, : self._taps]
        return self._interp @ samples.reshape(-1, 4)

    def _log_domain_rows(self, rho_c: Coefficients, rows: Array) -> Array:
        """N / Z at ``rows`` (N, 3) by direct log-sum-exp quadrature on the grid, as
        :class:`~spheredens.interaction.SphereDirectQuadrature` computes it (rho floored at 0)."""
        g = self.grid
        with np.errstate(divide="ignore"):
            log_a = np.log(np.maximum(g.synth(rho_c).reshape(-1) * g.weight.reshape(-1), 0.0))
        z, n, _, _ = pruned_logsumexp_sums(self._query[rows], self._sources, log_a, self._vy)
        return n / np.where(z > 0.0, z, np.inf)[:, None]

    def _averages(self, rho_c: Coefficients) -> Array:
        """N / Z (sa) or N (usa) as vectors (N, 3); for sa, the rows with a tiny partition
        function in the log domain."""
        fields = self.fields(rho_c)
        h = fields[:, 0]
        n = np.einsum("nf,fnd->nd", fields, self._vectors) @ self.model.V.T
        if not self.model.kind.normalized:
            with np.errstate(
                over="ignore", invalid="ignore"
            ):  # usa at large beta: inf, caught later
                return n * np.exp(self._kappa)[:, None]
        out = n / np.where(h > 0.0, h, np.inf)[:, None]
        small = self._small_rows(h)
        if small.size:
            out[small] = self._log_domain_rows(rho_c, small)
        return clip_norm(out, self._v_norm)

    def _small_rows(self, h: Array) -> Array:
        small = np.flatnonzero((h < GUARD_RELATIVE_Z * h.max()) | ~(h > 0.0))
        self.fallback_fraction = self.guarded_fraction = small.size / h.size
        return small

    def attention_average(self, rho_c: Coefficients) -> Array:
        return self._averages(rho_c).reshape(self.grid.shape + (3,))

    def velocity(self, state: Coefficients) -> Array:
        """Components along the grid's (e_theta, e_phi) from precomputed coefficients; rows
        with a tiny partition function in the log domain (module docstring)."""
        if self.model.beta == 0.0 or self.frame is None or not self.model.kind.normalized:
            return super().velocity(state)
        out = np.empty((len(np.atleast_2d(state)), 2) + self.grid.shape)
        for k, c in enumerate(np.atleast_2d(state)):
            fields = np.ascontiguousarray(self.fields(c).T)  # (4, N): the sums below run along n
            h = fields[0]
            comp = np.einsum("cfn,fn->cn", self._coef, fields)
            with np.errstate(divide="ignore", invalid="ignore"):  # h <= 0: rows redone below
                comp /= h
            small = self._small_rows(h)
            if small.size:
                avg = self._log_domain_rows(c, small)
                # P_x N / Z along e_theta, e_phi: the frame vectors are tangent
                comp[0, small] = np.sum(self.grid.e_theta.reshape(-1, 3)[small] * avg, axis=-1)
                comp[1, small] = np.sum(self.grid.e_phi.reshape(-1, 3)[small] * avg, axis=-1)
            speed2 = comp[0] ** 2 + comp[1] ** 2
            over = speed2 > self._v_norm**2
            if over.any():
                comp[:, over] *= self._v_norm / np.sqrt(speed2[over])
            out[k] = comp.reshape((2,) + self.grid.shape)
        return out
