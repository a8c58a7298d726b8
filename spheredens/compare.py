"""Density versus particles: W2 at every common snapshot time (``spheredens compare``); for runs
with slices (``usa_av``) the marginal and every slice against the particles of that slice."""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from ._lazy import pyplot as plt, xarray as xr
from .accessor import register_accessor
from .analysis import curve_summary, DEPARTURE_FACTOR, DEPARTURE_OFFSET
from .config import config_from_dict
from .diagnostics import particle_projection_distance
from .exceptions import SchemaError
from .problem import Problem
from .geometry import circle_angle, domain_of_dimension
from .plot import save_figure
from .schema import COMPARE_SCHEMA, CONVENTIONS, TIME, XI
from .diagnostics import grid_atoms
from .transport import DENSITY_ATOMS

Array = NDArray[np.float64]

#: two snapshot times are the same when they differ by less than this (relative to max(1, |t|))
TIME_TOLERANCE = 1e-9


def common_times(t_density: Array, t_particles: Array) -> tuple[Array, Array]:
    """Index pairs of the snapshot times present in both (within 1e-9); never interpolated."""
    pairs = [(i, int(np.argmin(np.abs(t_particles - t)))) for i, t in enumerate(t_density)]
    pairs = [(i, j) for i, j in pairs
             if abs(t_particles[j] - t_density[i]) <= TIME_TOLERANCE * max(1.0, abs(t_density[i]))]
    if not pairs:
        raise SchemaError("the density and particle files have no snapshot time in common "
                          f"(density: {_list(t_density)}; particles: {_list(t_particles)}); "
                          "rerun one of them with the other's times (time.times)")
    i, j = np.array(pairs).T
    return i, j


def _list(t: Array) -> str:
    t = np.asarray(t)
    shown = ", ".join(f"{v:g}" for v in t[:8])
    return shown + (f", ... ({t.size} times)" if t.size > 8 else "")


def particle_slices(particles: Any, xi: Array, *, name: str = "particle run") -> NDArray[np.int64] | None:
    """Slice index (into the density's labels ``xi``) of every particle: from the particles'
    ``xi`` labels when present (matched to within 1e-9), else from their ``slice`` indices;
    None when the file carries neither (unlabelled particles).

    Raises
    ------
    SchemaError
        A label that is not among ``xi``, or a slice index out of range.
    """
    xi = np.asarray(xi, dtype=float)
    if "xi" in particles and particles["xi"].dims == ("particle",):
        labels = np.asarray(particles["xi"].values, dtype=float)
        values, inverse = np.unique(labels, return_inverse=True)
        nearest = np.abs(values[:, None] - xi[None, :]).argmin(axis=1)
        bad = np.abs(xi[nearest] - values) > 1e-9 * np.maximum(1.0, np.abs(values))
        if np.any(bad):
            raise SchemaError(f"{name}: particle label xi = {values[bad][0]:g} is not a slice of the "
                              f"density (xi: {_list(xi)})")
        index = nearest[inverse.reshape(-1)]
        return index.astype(np.int64)
    if "slice" in particles and particles["slice"].dims == ("particle",):
        index = np.asarray(particles["slice"].values).astype(np.int64)
        if index.size and (index.min() < 0 or index.max() >= len(xi)):
            raise SchemaError(f"{name}: slice indices must lie in 0..{len(xi) - 1} (the density's slices)")
        return index
    return None


def compare(density: Any, particles: Any | Sequence[Any], *, n_points: int = DENSITY_ATOMS,
            density_file: str = "", particle_files: Sequence[str] = ()) -> Any:
    """W2 between a density run and one or several particle runs at their common times.

    Parameters
    ----------
    density : xarray.Dataset
        Schema spheredens-1. With slices (``usa_av``: dim ``xi``) ``w2`` compares the marginal
        sum_k r_k rho_k with all particles (their weights), and ``w2_slice`` each slice.
    particles : Dataset or list of Datasets
        Schema spheredens-particles-1, same domain; for a density with slices, particles
        labelled by ``xi`` or ``slice`` (particle) (see :func:`particle_slices`).
    n_points : int
        Sphere: the density is coarsened to about this many atoms before the exact EMD (the
        default is that of the runs' ``w2_projection``).

    Returns
    -------
    xarray.Dataset
        ``w2`` (run, time) in radians, ``w2_mean`` and ``w2_std`` over runs (time), and
        ``density_resolution`` (time): on the circle h / sqrt(12) for uniform cells, the W2 between
        the piecewise-constant density and its cell-centre atoms (the grid's resolution); on the
        sphere the coarsening bound (see :func:`spheredens.transport.sphere_density_atoms`). The
        density is represented as for the runs' ``w2_projection``
        (:func:`spheredens.diagnostics.grid_atoms`, stated in the ``comment`` of ``w2``). With several runs also
        ``w2_between_runs`` (run, other_run): W2 between the runs at the last common time, the
        ensemble's sampling error (:func:`ensemble_agreement`). With slices also
        ``w2_slice`` (run, time, xi): W2 between rho_k (normalized) and the particles of slice k
        (weights renormalized; NaN where a run has no particle of slice k or no labels) and
        ``w2_slice_mean`` (time, xi) over runs.
    """

    register_accessor()
    runs = [particles] if isinstance(particles, xr.Dataset) else list(particles)
    grid = density.sd.grid()
    domain = grid.domain.name
    for k, p in enumerate(runs):
        if p.attrs.get("domain", domain) != domain:
            raise SchemaError(f"particle run {k} is on the {p.attrs.get('domain')}, the density on the {domain}")
        d = p["position"].shape[-1]
        if d != grid.domain.d:
            raise SchemaError(f"particle run {k} has {d}-component positions; the {domain} needs "
                              f"{grid.domain.d}")
    t_den = density["time"].values
    index = [common_times(t_den, p["time"].values) for p in runs]
    shared = sorted(set.intersection(*[set(i.tolist()) for i, _ in index]))
    if not shared:
        raise SchemaError("no snapshot time is common to the density and every particle run")
    times = t_den[shared]
    sliced = "xi" in density["rho"].dims
    xi = density["xi"].values if sliced else np.zeros(0)
    labels = [particle_slices(p, xi, name=f"particle run {k}") if sliced else None
              for k, p in enumerate(runs)]
    w2 = np.full((len(runs), len(shared)), np.nan)
    w2_slice = np.full((len(runs), len(shared), len(xi)), np.nan)
    resolution = np.zeros(len(shared))

    distance = grid.domain.w2
    represent = grid_atoms(grid.domain)

    centroids = "rho_centroid" in density  # the marginal's cell centroids (log_sl)
    for col, i in enumerate(shared):
        centroid = np.asarray(density["rho_centroid"].values[i], dtype=float) if centroids else None
        atoms, masses, bound = represent.atoms(grid, density.sd.marginal(i), n_points, centroid)
        resolution[col] = represent.resolution(grid, density.sd.marginal(i), bound)
        slice_atoms = [represent.atoms(grid, np.asarray(density["rho"].values[i, m], dtype=float),
                                       n_points)[:2] for m in range(len(xi))]
        for k, (p, (di, pj)) in enumerate(zip(runs, index)):
            j = int(pj[list(di).index(i)])
            x = np.asarray(p["position"].values[j])
            w = np.asarray(p["particle_weight"].values)
            w2[k, col] = distance(atoms, masses, x, w)
            if labels[k] is None:
                continue
            for m, (a, ma) in enumerate(slice_atoms):
                sel = labels[k] == m
                if np.any(sel) and w[sel].sum() > 0 and ma.sum() > 0:
                    w2_slice[k, col, m] = distance(a, ma, x[sel], w[sel])
    method = f"{represent.method}; {represent.describe(grid, n_points, centroids)}"
    ds = xr.Dataset(
        {"w2": (("run", "time"), w2, {"long_name": "W2 distance between density and particles",
                                      "units": "radian", "comment": method}),
         "w2_mean": ("time", w2.mean(axis=0), {"long_name": "mean of w2 over particle runs",
                                               "units": "radian"}),
         "w2_std": ("time", w2.std(axis=0, ddof=1) if len(runs) > 1 else np.zeros(len(shared)),
                    {"long_name": "standard deviation of w2 over particle runs (ddof = 1)",
                     "units": "radian"}),
         "density_resolution": ("time", resolution, {
             "long_name": "resolution of the density (circle: W2 between its piecewise-constant cells "
                          "and their centres; sphere: W2 bound between grid and coarse atoms)",
             "units": "radian"}),
         "seed": ("run", np.array([int(p.attrs.get("seed", -1)) for p in runs]),
                  {"long_name": "seed of each particle run (-1: unknown)"}),
         "n_particles": ("run", np.array([p.sizes["particle"] for p in runs]),
                         {"long_name": "number of particles of each run"})},
        coords={"time": TIME.entry(times)},
        attrs={"Conventions": CONVENTIONS, "spheredens_schema": COMPARE_SCHEMA,
               "density_file": density_file, "particle_files": "\n".join(particle_files),
               "domain": domain, "method": method,
               "initialization": ", ".join(sorted({str(p.attrs.get("initialization", "unknown"))
                                                   for p in runs}))})
    dep = departures(density, runs)
    ds["density_departure_time"] = ((), dep["density"]["departure_time"], {
        "long_name": "departure time of the density from Pi_# rho_0", "units": "1",
        "comment": f"first snapshot after the minimum of w2_projection with W2 > {DEPARTURE_FACTOR:g} min + "
                   f"{DEPARTURE_OFFSET:g} (analyze-beta); NaN: not by t = {dep['density']['t_end']:g}"})
    ds["departure_time"] = ("run", np.array([r["departure_time"] for r in dep["runs"]]), {
        "long_name": "departure time of each particle run from Pi_# rho_0", "units": "1",
        "comment": "as density_departure_time, on the run's own snapshot times, from the W2 of the "
                   "particles to Pi_# of their own initial positions (particle_w2_projection); NaN: "
                   "not by the run's last time"})
    at_common = [[curve[int(pj[list(di).index(i)])] for i in shared] for curve, (di, pj) in zip(dep["w2"], index)]
    ds["particle_w2_projection"] = (("run", "time"), np.array(at_common, dtype=float), {
        "long_name": "W2 of each particle run to Pi_# of its initial particles", "units": "radian",
        "comment": "at the common times; departure_time uses every snapshot of the run"})
    ds.attrs["departure_verdict"] = dep["verdict"]
    if len(runs) > 1:  # the ensemble's own spread at the last common time
        last = [int(pj[list(di).index(shared[-1])]) for di, pj in index]
        ds["w2_between_runs"] = (("run", "other_run"), w2_between_runs(runs, last), {
            "long_name": "W2 between the particle runs at the last common time (the ensemble's "
                         "sampling error; see spheredens.compare.ensemble_agreement)",
            "units": "radian", "time": float(times[-1])})
    if sliced:
        ds = ds.assign_coords(xi=XI.entry(xi))
        ds["w2_slice"] = (("run", "time", "xi"), w2_slice, {
            "long_name": "W2 between slice density rho_k and the particles of slice k (each normalized)",
            "units": "radian"})
        ds["w2_slice_mean"] = (("time", "xi"), w2_slice.mean(axis=0), {
            "long_name": "mean of w2_slice over particle runs", "units": "radian"})
        ds["w2"].attrs["long_name"] = ("W2 distance between the marginal density sum_k r_k rho_k and "
                                       "all particles")
        ds.attrs["slices"] = ("w2: marginal vs all particles; w2_slice: each slice vs its particles "
                              "(labels: " + ", ".join("none" if lab is None else "yes" for lab in labels) + ")")
    return ds


def density_model(density: Any):
    """The model of the density run ``density`` (rebuilt from its ``config``), or None and the
    reason it could not be."""
    text = density.attrs.get("config")
    if not text:
        return None, "the density file has no config attribute (not written by spheredens run)"
    try:
        return Problem.from_config(config_from_dict(tomllib.loads(str(text)))).model, ""
    except Exception as exc:  # any failure to rebuild the model: say so, do not stop compare
        return None, f"the density's configuration could not be rebuilt ({exc})"


def particle_projection_curve(model: Any, run: Any) -> tuple[Array, str]:
    """W2 of a particle run to Pi_# of its own particles at t = 0 at each of its snapshots
    (:class:`spheredens.diagnostics.ParticleProjectionDistance`, the ``w2_projection`` that
    spheredens particle runs record), and the reason when it is undefined (NaN then)."""
    t = np.asarray(run["time"].values, dtype=float)
    positions = np.asarray(run["position"].values, dtype=float)
    weight = np.asarray(run["particle_weight"].values, dtype=float)
    if abs(t[0]) > TIME_TOLERANCE:
        return np.full(t.size, np.nan), f"the particle file starts at t = {t[0]:g}, not 0"
    distance, reason = particle_projection_distance(model, positions[0], weight)
    if distance is None:
        return np.full(t.size, np.nan), reason
    return np.array([distance(x, weight) for x in positions]), ""


def departures(density: Any, runs: Sequence[Any]) -> dict[str, Any]:
    """When the density and each particle run leave the zero-temperature target, by the
    definition of ``analyze-beta`` (:func:`spheredens.analysis.curve_summary`: the first
    snapshot after the minimum of W2 to the target with W2 > 2 min + 0.02), each on its own
    snapshot times.

    The density's W2 is its ``w2_projection`` (to Pi_# rho_0); each particle run's is to
    Pi_# of its own initial particles (:func:`particle_projection_curve`, with the density's
    model), computed from the positions so that files converted from other codes are treated
    alike.

    Returns
    -------
    dict
        ``density`` (curve summary and ``t_end``, the density's last time), ``runs`` (one per
        particle run, the same keys), ``w2`` (per run, its W2 curve at each of its times),
        ``verdict`` (a sentence: who departs when, and what W2 between them means after that)
        and ``reason`` (why no departure could be computed, else empty).
    """
    t_den = np.asarray(density["time"].values, dtype=float)
    den_w2 = (np.asarray(density["w2_projection"].values, dtype=float) if "w2_projection" in density
              else np.full(t_den.size, np.nan))
    dens = {**curve_summary(t_den, den_w2), "t_end": float(t_den[-1])}
    model, reason = density_model(density)
    rows, curves = [], []
    for p in runs:
        t_p = np.asarray(p["time"].values, dtype=float)
        w, why = (np.full(t_p.size, np.nan), reason) if model is None else particle_projection_curve(model, p)
        reason = reason or why
        curves.append(w)
        rows.append({**curve_summary(t_p, w), "t_end": float(t_p[-1])})
    if not np.isfinite(dens["min_w2"]):
        reason = reason or "the density file has no finite w2_projection"
    verdict = (f"departure from Pi_# rho_0 not compared: {reason}" if reason
               else departure_verdict(dens, rows))
    return {"density": dens, "runs": rows, "w2": curves, "verdict": verdict, "reason": reason}


def departure_verdict(density: dict[str, float], runs: Sequence[dict[str, float]]) -> str:
    """The sentence ``compare`` prints about the departures (see :func:`departures`)."""
    rule = (f"departure: first time after the minimum with W2 to the target > {DEPARTURE_FACTOR:g} min + "
            f"{DEPARTURE_OFFSET:g}; targets Pi_# rho_0 and Pi_# of each run's initial particles")
    t_d = density["departure_time"]
    dep = np.array([r["departure_time"] for r in runs])
    gone = dep[np.isfinite(dep)]
    ends = np.array([r["t_end"] for r in runs])
    if gone.size:
        spread = (f"at t = {gone.min():g}" if gone.size == 1 or gone.min() == gone.max()
                  else f"at t = {gone.min():g} to {gone.max():g} (mean {gone.mean():.4g})")
        parts = f"{gone.size} of {len(runs)} particle run(s) depart {spread}"
        if gone.size < len(runs):
            parts += f", the others not by t = {ends[~np.isfinite(dep)].min():g}"
    else:
        parts = f"the particles have not departed by t = {ends.min():g}"
    dens = (f"the density departs at t = {t_d:g}" if np.isfinite(t_d)
            else f"the density has not departed by t = {density['t_end']:g}")
    if np.isfinite(t_d) and gone.size:
        first = min(t_d, float(gone.min()))
        who = "the particles" if gone.min() < t_d else "the density"
        tail = (f"; from t = {first:g} on they are in different phases ({who} first), so W2 between "
                "them measures the gap between the departures, not an error of either code")
        if abs(t_d - gone.min()) <= 0 and abs(t_d - gone.max()) <= 0:
            tail = "; they depart together"
    elif np.isfinite(t_d):
        tail = (f"; the density has left Pi_# rho_0 and the particles have not: after t = {t_d:g} "
                "W2 between them measures the departure, not an error of either code")
    elif gone.size:
        tail = (f"; the particles have left Pi_# rho_0 and the density has not: after t = {gone.min():g} "
                "W2 between them measures the departure, not an error of either code (at low "
                "temperature n particles leave early: they carry no mass below ~1/n, "
                "docs/particles_low_temperature.md)")
    else:
        tail = "; neither has departed"
    return f"{dens}; {parts}{tail} ({rule})"


def w2_between_runs(runs: Sequence[Any], index: int | Sequence[int] = -1) -> Array:
    """Pairwise W2 between particle runs at snapshot ``index``, a symmetric (R, R) matrix.

    ``index`` is one snapshot index for all runs or one per run. All particles of each run
    with their weights (on the circle the exact W2 of POT's ``wasserstein_circle``, on the
    sphere the exact EMD with squared geodesic cost).
    """
    runs = list(runs)
    idx = [index] * len(runs) if np.ndim(index) == 0 else list(index)
    out = np.zeros((len(runs), len(runs)))
    for i in range(len(runs)):
        xa, wa = runs[i]["position"].values[idx[i]], runs[i]["particle_weight"].values
        for j in range(i + 1, len(runs)):
            xb, wb = runs[j]["position"].values[idx[j]], runs[j]["particle_weight"].values
            out[i, j] = domain_of_dimension(xa.shape[-1]).w2(xa, wa, xb, wb)
            out[j, i] = out[i, j]
    return out


def ensemble_agreement(to_density: Array, between: Array) -> dict[str, Any]:
    """Is a density within the sampling error of an ensemble of particle runs?

    Parameters
    ----------
    to_density : ndarray (R,)
        W2 from the density to each of R particle runs (same n, different seeds).
    between : ndarray (R, R)
        W2 between the runs (:func:`w2_between_runs`).

    Returns
    -------
    dict
        ``density_mean``: mean W2 from the density to the runs; ``between_mean``: mean W2 over
        pairs of runs; ``run_means``: for each run its mean W2 to the other runs;
        ``rank``: how many runs have a smaller ``run_means`` than ``density_mean`` (0..R);
        ``quantile`` = rank / R; ``no_farther_than_average``: density_mean <= between_mean;
        ``within_spread``: rank < R, i.e. some run is farther from the others than the density
        is from the runs.

    Notes
    -----
    Two readings of "the density agrees with the particles to within their sampling error".
    ``within_spread`` asks whether the density could pass for one more member of the ensemble:
    its mean distance to the runs is not larger than every run's mean distance to the others
    (with R runs, a density drawn like a run fails by chance with probability 1 / (R + 1)).
    ``no_farther_than_average`` is stricter: the mean-field limit of unbiased fluctuations sits
    at the ensemble's centre, closer to the runs than they are to each other (by sqrt 2 for
    independent Gaussian fluctuations), and fails when the runs share a bias, e.g. mass that
    is smaller than one particle's.
    """
    to_density = np.asarray(to_density, dtype=float)
    between = np.asarray(between, dtype=float)
    r = len(to_density)
    if r < 2 or between.shape != (r, r):
        raise ValueError(f"need at least 2 runs and an ({r}, {r}) matrix of distances between them, "
                         f"got {r} runs and shape {between.shape}")
    run_means = between.sum(axis=1) / (r - 1)
    density_mean = float(to_density.mean())
    between_mean = float(between[np.triu_indices(r, 1)].mean())
    rank = int(np.sum(run_means < density_mean))
    return {"density_mean": density_mean, "between_mean": between_mean, "run_means": run_means,
            "rank": rank, "quantile": rank / r, "no_farther_than_average": density_mean <= between_mean,
            "within_spread": rank < r}


def compare_output_path(density_path: str | Path, output: str | Path | None = None) -> Path:
    """The comparison file of ``spheredens compare``: ``output`` when given, else
    ``<density>_compare.nc`` beside the density file (named after the density: a name like the
    particle files' would match their glob next time)."""
    if output:
        return Path(output)
    density_path = Path(density_path)
    return density_path.with_name(density_path.stem + "_compare.nc")


def comparison_summary(cmp: Any) -> dict[str, Any]:
    """What ``spheredens compare`` reports about a result of :func:`compare` besides W2 per time.

    Returns
    -------
    dict
        ``ensemble``: :func:`ensemble_agreement` of the density and the runs at the last common
        time (None with a single run); ``slices`` (None without slices): for every time a dict
        with ``mean`` and ``max`` of ``w2_slice_mean`` over the slices with particle labels and
        their ``count`` (0, and NaN mean and max, when the runs have no labels).
    """
    ensemble = None
    if "w2_between_runs" in cmp:
        ensemble = ensemble_agreement(cmp["w2"].values[:, -1], cmp["w2_between_runs"].values)
    slices = None
    if "w2_slice" in cmp:  # usa_av: w2 is the marginal's
        slices = []
        for row in cmp["w2_slice_mean"].values:
            if np.all(np.isnan(row)):
                slices.append({"mean": np.nan, "max": np.nan, "count": 0})
                continue
            slices.append({"mean": float(np.nanmean(row)), "max": float(np.nanmax(row)),
                           "count": int(np.sum(~np.isnan(row)))})
    return {"ensemble": ensemble, "slices": slices}


def plot_comparison(cmp: Any, density: Any, particles: Any, path: str | Path, *, times: Any = None) -> Path:
    """W2 against time (mean +- std over runs) and the density with particles overlaid."""


    register_accessor()
    grid = density.sd.grid()
    t = cmp["time"].values
    idx = (np.unique(np.linspace(0, t.size - 1, min(3, t.size)).round().astype(int)) if times is None
           else [int(np.argmin(np.abs(t - v))) for v in np.atleast_1d(times)])
    fig = plt.figure(figsize=(4.0 * (len(idx) + 1.3), 3.8))
    ax = fig.add_subplot(1, len(idx) + 1, 1)
    mean, std = cmp["w2_mean"].values, cmp["w2_std"].values
    ax.semilogy(t, mean, "o-", color="C3", label=f"W2 ({cmp.sizes['run']} run(s))")
    if cmp.sizes["run"] > 1:
        ax.fill_between(t, np.maximum(mean - std, 1e-16), mean + std, color="C3", alpha=0.25)
    ax.semilogy(t, cmp["density_resolution"].values, ":", color="k", label="density resolution")
    ax.set_xlabel("t")
    ax.set_ylabel("W2 (radians)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    for c, i in enumerate(idx):
        ti = t[i]
        di = int(np.argmin(np.abs(density["time"].values - ti)))
        pi = int(np.argmin(np.abs(particles["time"].values - ti)))
        x = particles["position"].values[pi]
        if grid.theta is not None:  # the circle: histogram of the angles
            a = fig.add_subplot(1, len(idx) + 1, c + 2)
            a.hist(circle_angle(x), bins=max(20, int(np.sqrt(x.shape[0]))), range=(0, 2 * np.pi),
                   density=True, weights=particles["particle_weight"].values, color="C1", alpha=0.5,
                   label="particles (histogram)")
            a.plot(grid.theta, density.sd.marginal(di), color="C0",
                   label="rho (marginal)" if "xi" in density["rho"].dims else "rho")
            a.set_xlabel("theta (radians)")
            a.legend(fontsize=7)
        else:
            a = fig.add_subplot(1, len(idx) + 1, c + 2, projection="mollweide")
            lat, lon, rho_view = grid.regular_view(density.sd.marginal(di))
            centred = np.where(lon >= 180, lon - 360, lon)
            order = np.argsort(centred)
            a.pcolormesh(np.radians(centred[order]), np.radians(lat), rho_view[:, order],
                         shading="nearest", cmap="magma")
            plat = np.arcsin(np.clip(x[:, 2], -1, 1))
            plon = np.arctan2(x[:, 1], x[:, 0])
            a.scatter(plon, plat, s=2, c="cyan", alpha=0.6)
            a.set_xticklabels([])
            a.set_yticklabels([])
        a.set_title(f"t = {ti:g}, W2 = {float(mean[i]):.3g}", fontsize=9)
    return save_figure(fig, path)


def density_function(ds: Any, index: int) -> Any:
    """rho (the marginal with slices) at snapshot ``index`` of a run as a function of points
    x (n, d) -> (n,): ``ds.sd.density_function(index)``
    (:meth:`spheredens.accessor.SpheredensAccessor.density_function`)."""
    register_accessor()
    return ds.sd.density_function(index)
