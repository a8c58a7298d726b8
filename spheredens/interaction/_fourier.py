"""FFT convolution on the circle when B = Q^T K is a positive multiple of a rotation."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy import special

from .._types import Array
from ..grids import CircleGrid
from ..models import Model
from ._base import Evaluator, Layout, register_evaluator
from ._quadrature import DirectQuadrature, clip_norm

#: targets whose (scaled) partition function is below this fraction of its maximum are
#: recomputed by direct quadrature: the FFT gives Z there only to absolute accuracy eps * max Z
FALLBACK_RELATIVE_Z = 1e-6


def aliased_multipliers(n: int, kappa: float, delta: float) -> NDArray[np.complex128]:
    """M_k = sum_p ive(k + p n, kappa) exp(i (k + p n) delta), k = 0..n-1.

    With these multipliers ``n * ifft(fft(b) * M)`` equals, to round-off, the discrete sum
    sum_j exp(kappa cos(theta_t - phi0 - theta_j)) b_j e^{-kappa} on two uniform grids offset by
    delta: the generating function exp(kappa cos t) = sum_m I_m(kappa) e^{imt} folded onto the
    n discrete modes. Terms with ive(m, kappa) < 1e-20 ive(0, kappa) are dropped.
    """
    m_max = int(np.ceil(np.sqrt(2.0 * max(kappa, 0.0) * 48.0))) + 48
    m = np.arange(-m_max, m_max + 1)
    vals = special.ive(np.abs(m), kappa)
    phase = np.exp(1j * m * delta)
    out = np.zeros(n, dtype=complex)
    k = np.mod(m, n)
    out.real = np.bincount(k, weights=vals * phase.real, minlength=n)
    out.imag = np.bincount(k, weights=vals * phase.imag, minlength=n)
    return out


@register_evaluator
class FourierConvolution(Evaluator):
    """Velocity on a uniform circle grid by FFT, for B = a R(phi0) (a > 0, R a rotation).

    Then <B^T x(theta), y(phi)> = a cos(theta - phi0 - phi): Z and N are circular convolutions
    of rho, rho cos(phi), rho sin(phi) with exp(kappa cos), kappa = beta a, evaluated at
    theta - phi0. Their Fourier multipliers are 2 pi I_k(kappa) (scipy.special.ive, scaled by
    e^{-kappa}, which cancels in N/Z). The multipliers are folded exactly onto the n discrete
    modes (see :func:`aliased_multipliers`), so the result equals direct quadrature of the same
    grid to round-off for every kappa.

    Where the scaled Z is below ``FALLBACK_RELATIVE_Z`` times its maximum, the FFT has too few
    significant digits and those targets are recomputed by :class:`DirectQuadrature` in
    log-sum-exp form; |N/Z| is clipped to ||V||_2.

    Parameters
    ----------
    model : Model
    sources, targets : CircleGrid
        Two uniform grids with the same n (targets may be offset, e.g. cell faces).
    """

    name = "fft"
    domains = ("circle",)
    inputs = ("values",)
    priority = 10

    description = "circle: FFT convolution with Bessel multipliers (B a multiple of a rotation)"

    @classmethod
    def unmet(cls, model: Model) -> str | None:
        """None when d = 2 and B = Q^T K = a R with a > 0 and R a rotation; else what it needs."""
        if model.d == 2 and model.kernel.rotation_multiple_2d() is not None:
            return None
        return (
            "needs B = Q^T K to be a positive multiple of a rotation, and "
            f"B = {model.B.tolist()} is not"
        )

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "FourierConvolution":
        return cls(model, layout.sources, layout.targets)

    def __init__(self, model: Model, sources: CircleGrid, targets: CircleGrid) -> None:
        decomposition = model.kernel.rotation_multiple_2d()
        if decomposition is None:
            raise ValueError(
                "FourierConvolution needs B = Q^T K to be a positive multiple of a rotation"
            )
        if sources.n != targets.n:
            raise ValueError("FourierConvolution needs source and target grids of the same size")
        a, phi0 = decomposition
        self.model = model
        self.n = sources.n
        self.kappa = model.beta * a
        delta = (targets.offset - sources.offset) * sources.h - phi0
        self._multipliers = aliased_multipliers(self.n, self.kappa, delta)
        self._h = sources.h
        self._y = sources.points
        self.targets = targets.points
        self._v = model.V
        self._v_norm = model.V_norm
        self._fallback = DirectQuadrature(
            model, sources.points, sources.weight, targets.points, max_cached=0
        )

    def attention_average(self, rho: Array) -> Array:
        """N/Z (``sa``) or N (``usa``) at the targets for one density rho (n,); shape (n, 2)."""
        b = np.asarray(rho, dtype=float) * self._h
        fields = np.stack([b, b * self._y[:, 0], b * self._y[:, 1]])
        conv = self.n * np.fft.ifft(np.fft.fft(fields, axis=-1) * self._multipliers, axis=-1).real
        z = conv[0]
        n = conv[1:].T @ self._v.T
        small = np.flatnonzero(z < FALLBACK_RELATIVE_Z * z.max())
        if self.model.kind.normalized:
            out = n / np.where(z > 0, z, 1.0)[:, None]
            if small.size:
                out[small] = self._fallback.attention_average(rho, rows=small)
            return clip_norm(out, self._v_norm)
        with np.errstate(over="ignore"):  # usa at large beta overflows: inf, caught by the loop
            out = n * np.exp(self.kappa)
        if small.size:
            out[small] = self._fallback.attention_average(rho, rows=small)
        return out

    vectors = Evaluator.projected_averages  # X = P_x (N/Z or N) of each slice at the targets
