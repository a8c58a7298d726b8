"""Particle runs of other codes read from common array formats (``spheredens
convert-particles``): :func:`convert_particles` reads ``.npy`` and ``.npz`` arrays of positions
or angles, checks every part in one line each, and returns a spheredens-particles-1 Dataset.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ._validate import input_file_problem
from .config import RunConfig, load_config
from .exceptions import ConfigError, SchemaError
from .geometry import DOMAINS, get_domain
from .models import MODELS
from .problem import Problem
from .schema import (
    CONVERTED_WEIGHT_LONG_NAME,
    PARTICLE_VARIABLES,
    UNIT_TOLERANCE,
    VALUE_KINDS,
    particle_dataset,
    validate_particles,
)

logger = logging.getLogger(__name__)

#: the axes of the arrays :func:`convert_particles` reads, in the order spheredens stores them
POSITION_AXES = ("time", "n", "d")
ANGLE_AXES = ("time", "n")
#: how far angles may lie outside [-pi, pi] or [0, 2 pi] (a float32 pi is 8.7e-8 above pi)
ANGLE_SLACK = UNIT_TOLERANCE
#: how the messages of :func:`convert_particles` name its options (the command line passes its own)
CONVERT_OPTIONS = {
    "times": "times=[...]",
    "dt": "dt=...",
    "degrees": "degrees=True",
    "axes": "axes",
    "angles": "angles=True",
    "model": "attrs['model']",
}
#: times t_k = k dt up to the configuration's t_end (1 + this) are within it (as
#: :data:`spheredens.analysis.TIME_TOLERANCE`)
SPAN_TOLERANCE = 1e-9


def _real(values: Any, what: str) -> Any:
    """``values`` as a float64 array; a one-line SchemaError unless they are real numbers."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise SchemaError(
            f"{what} holds {VALUE_KINDS.get(arr.dtype.kind, 'non-numbers')} (dtype {arr.dtype}), "
            "not real numbers"
        )
    return arr.astype(float)


def _parse_axes(axes: Any, option: str) -> tuple[str, ...] | None:
    """``axes`` ("n,time,d" or a sequence of names) as a tuple, checked: a permutation of
    :data:`POSITION_AXES` (positions) or :data:`ANGLE_AXES` (angles)."""
    if axes is None:
        return None
    names = (
        tuple(a.strip() for a in axes.split(","))
        if isinstance(axes, str)
        else tuple(map(str, axes))
    )
    if sorted(names) not in (sorted(POSITION_AXES), sorted(ANGLE_AXES)):
        shown = axes if isinstance(axes, str) else ",".join(names)
        raise ConfigError(
            option,
            f"{shown[:100]!r} must name each axis of the array once, in the array's "
            "order: time, n and d for positions (e.g. n,time,d), time and n for angles "
            "(e.g. n,time)",
        )
    return names


def _layout(order: tuple[str, ...], sizes: Mapping[str, int]) -> str:
    """The shape that ``order`` expects, e.g. "(41, n, 2)": the ``sizes`` known, names otherwise."""
    return "(" + ", ".join(str(sizes[a]) if a in sizes else a for a in order) + ")"


def _axes_hint(
    shape: tuple[int, ...],
    order: tuple[str, ...],
    sizes: Mapping[str, int],
    option: str,
    at_most: Mapping[str, int] | None = None,
) -> str:
    """ "; if the array is (n, time, d), give --axes n,time,d" for the first other order of the
    axes under which ``shape`` has the ``sizes`` (and axes no longer than ``at_most``), or ""
    when there is none."""
    for other in itertools.permutations(sorted(order, key=POSITION_AXES.index)):
        if (
            other != order
            and all(shape[other.index(a)] == size for a, size in sizes.items())
            and all(shape[other.index(a)] <= most for a, most in (at_most or {}).items())
        ):
            return f"; if the array is ({', '.join(other)}), give {option} {','.join(other)}"
    return ""


def convert_particles(
    source: str | Path,
    *,
    domain: str | None = None,
    times: Any = None,
    dt: float | None = None,
    angles: bool | None = None,
    degrees: bool = False,
    axes: str | Any = None,
    attrs: dict[str, Any] | None = None,
    config: Any = None,
    options: Mapping[str, str] | None = None,
    notify: Callable[[str, str], None] | None = None,
) -> Any:
    """Read particles computed by another code: ``spheredens convert-particles IN OUT``.

    Accepted: ``.npy`` holding positions (time, n, d) or angles (time, n) on the circle;
    ``.npz`` with one of the keys ``position``/``positions``/``x``/``X`` (time, n, d) or
    ``theta``/``angles`` (time, n), optionally ``time``/``t`` and ``weight``/``weights``/
    ``particle_weight``. Times come from the file, from ``times`` or from ``dt`` (t_k = k dt).

    What is given is checked, each in one line: real numbers; angles in [-pi, pi] or [0, 2 pi]
    (radians; ``degrees`` converts degrees); positions unit vectors to ``UNIT_TOLERANCE``
    (1e-6; the message names the worst row); the length of the time axis equal to the number
    of times given (file, ``times``), and of the particle axis to the number of weights (the
    message names the shape read, the shape expected and the ``axes`` that would fit); at least
    one snapshot and one particle; a registered model name in ``attrs``. With ``dt`` alone (no
    times, no weights, no ``axes``) nothing counts the axes, and no layout is guessed from the
    shape: with ``config`` the times k dt must end by its ``time.t_end``, and a time axis longer
    than the particle axis is told to ``notify``. The file records how it was read (attribute
    ``source_layout``, e.g. "shape (1000, 41, 3) read as (time, n, d)").

    Parameters
    ----------
    source : path
        The ``.npy`` or ``.npz`` file.
    domain : str, optional
        ``"circle"`` or ``"sphere"``; required unless ``config`` gives it.
    times : sequence of float, optional
        The snapshot times, when the file has none (their number is checked against the time
        axis).
    dt : float, optional
        Instead of ``times``: t_k = k dt. With ``dt`` alone the number of times is the length of
        the time axis: it is checked against ``config``'s ``time.t_end`` (t_k <= t_end, else
        refused naming the ``axes`` that fits; ``axes`` stating the layout lifts the check), and
        without ``config`` only told (``notify``) when the time axis is longer than the particle
        axis. State ``axes`` unless the array is (time, n, d).
    angles : bool, optional
        The array holds angles on the circle (inferred for a 2-d array on the circle and for
        the keys ``theta``/``angles``).
    degrees : bool
        The angles are in degrees ([-180, 180] or [0, 360]; implies ``angles``).
    axes : str or sequence of str, optional
        The order of the array's axes (default ``"time,n,d"``, for angles ``"time,n"``), e.g.
        ``"n,time,d"`` for an array (particle, time, component), ``"n,time"`` for angles.
    config : RunConfig or path of a TOML run configuration, optional
        The model the particles were run with: the file then records it as a particle run of
        spheredens does (attributes ``model``, ``beta``, ``config``; ``Q``, ``K``, ``V``; usa_av:
        ``slice_xi``, ``slice_weight``), and :func:`spheredens.compare` checks it against the
        density. Without it the file carries no model and compare says it was not checked.
        Its ``[particles]`` table is not used: its ``n`` and ``dt`` (the integrator's step)
        describe the runs of ``spheredens particles``, not another code's snapshots.
    attrs : dict, optional
        Attributes to record (e.g. ``{"model": "sa", "beta": 30.0}``); ``model`` must be a
        registered model name.
    options : mapping, optional
        How the messages name the options ``times``, ``dt``, ``degrees``, ``axes``, ``angles``
        and ``model`` (default :data:`CONVERT_OPTIONS`, the keyword arguments; the command line
        passes ``--times``, ...).
    notify : callable, optional
        ``notify(kind, message)``, told ``("layout", message)`` when nothing counts the axes
        (``dt`` alone, no weights, no ``axes``) and the time axis is longer than the particle
        axis: how the array was read, and that ``axes`` reads another layout (the command line
        prints it as a ``spheredens: note:`` line). Without it the message is logged (INFO).

    Returns
    -------
    xarray.Dataset
        Schema spheredens-particles-1, ready for :func:`spheredens.compare` (write it with
        :func:`spheredens.write_dataset`).

    Raises
    ------
    SchemaError
        Not real numbers, angles out of range, non-unit vectors, NaN, wrong shapes or axes, a
        dimension that does not match ``domain``, times or weights of the wrong length, times
        k dt past ``config``'s t_end, no snapshot or no particle.
    ConfigError
        An invalid ``config`` or ``axes``, an unknown model, or a configuration whose domain or
        model disagrees with ``domain`` or the ``model``/``beta`` of ``attrs``.

    Example
    -------
    >>> import numpy as np, spheredens as sd
    >>> theta = np.linspace(0, 2 * np.pi, 100, endpoint=False)
    >>> np.save("tokens.npy", np.stack([theta, (theta + 0.1) % (2 * np.pi)]))   # 2 times
    >>> p = sd.convert_particles("tokens.npy", domain="circle", dt=0.5)
    >>> path = sd.write_dataset(p, "tokens.nc")
    """
    source = Path(source)
    say = {**CONVERT_OPTIONS, **(options or {})}
    attrs = dict(attrs or {})
    if "model" in attrs:  # a name of MODELS, as in a run configuration
        MODELS.get(attrs["model"], say["model"])
    layout = _parse_axes(axes, say["axes"])
    if times is not None and dt is not None:
        raise ConfigError(
            say["dt"],
            f"give the snapshot times ({say['times']}) or their spacing ({say['dt']}), not both",
        )
    if dt is not None:
        if (
            isinstance(dt, bool)
            or not isinstance(dt, (int, float, np.integer, np.floating))
            or not np.isfinite(dt)
            or dt <= 0
        ):
            raise ConfigError(say["dt"], f"must be a finite number > 0, got {dt!r:.100}")
        dt = float(dt)
    stamp = _model_stamp(config, domain, attrs) if config is not None else None
    if stamp is not None:
        domain = stamp["domain"]
    if domain is None:
        raise SchemaError(
            "give the domain ('circle' or 'sphere') or the run configuration of the particles"
        )
    if domain not in DOMAINS:
        raise SchemaError(f"domain must be {' or '.join(map(repr, DOMAINS))}, not {domain!r}")
    space = get_domain(domain)
    d, from_angles = space.d, space.points_of_angles  # the circle: angles -> (cos, sin)
    problem = input_file_problem(source, "a .npy or .npz file")
    if problem:
        raise SchemaError(f"{str(source)!r} {problem}")
    src = repr(str(source))
    weight = file_times = None
    what, t_what, w_what = src, "", ""
    try:
        if source.suffix == ".npy":
            arr = np.load(source, allow_pickle=False)
        elif source.suffix == ".npz":
            with np.load(source, allow_pickle=False) as data:
                keys = set(data.files)
                pos_key = next(
                    (
                        k
                        for k in ("position", "positions", "x", "X", "theta", "angles")
                        if k in keys
                    ),
                    None,
                )
                if pos_key is None:
                    raise SchemaError(
                        f"{src} has none of the keys position, positions, x, X, "
                        f"theta, angles (it has {', '.join(sorted(keys))})"
                    )
                arr = data[pos_key]
                what = f"{pos_key!r} of {src}"
                if pos_key in ("theta", "angles"):
                    angles = True
                t_key = next((k for k in ("time", "t") if k in keys), None)
                file_times = data[t_key] if t_key else None
                t_what = f"{t_key!r} of {src}"
                w_key = next(
                    (k for k in ("particle_weight", "weight", "weights") if k in keys), None
                )
                weight = data[w_key] if w_key else None
                w_what = f"{w_key!r} of {src}"
        else:
            raise SchemaError(f"{src}: expected a .npy or .npz file")
    except SchemaError:
        raise
    except Exception as exc:  # unreadable arrays become one line
        raise SchemaError(f"cannot read {src}: {exc}") from None
    arr = _real(arr, what)
    if layout is not None and len(layout) != arr.ndim:
        raise ConfigError(
            say["axes"],
            f"{','.join(layout)} names {len(layout)} axes; {what} has {arr.ndim} "
            f"(shape {arr.shape})",
        )
    if degrees:
        if angles is False or (angles is None and arr.ndim != 2):
            raise SchemaError(
                f"{what} holds positions (shape {arr.shape}); {say['degrees']} is for angles "
                "(time, n) on the circle"
            )
        angles = True
    if angles is None:
        angles = from_angles is not None and arr.ndim == 2
    if angles:
        if from_angles is None or arr.ndim != 2:
            raise SchemaError(
                f"angles must be an array (time, n) and the domain the circle; got shape "
                f"{arr.shape} on the {domain}"
            )
    elif arr.ndim != 3:
        raise SchemaError(
            f"positions must have shape (time, n, d) (or angles (time, n) on the "
            f"circle), got {arr.shape}"
        )
    expected = ANGLE_AXES if angles else POSITION_AXES
    order = layout or expected
    shape = arr.shape  # as read, in the order ``order``
    arr = np.transpose(arr, [order.index(a) for a in expected])  # now (time, n[, d])
    read = f"{what} of shape {shape} is read as ({', '.join(order)})"
    if not angles and arr.shape[-1] != d:
        raise SchemaError(
            f"positions have d = {arr.shape[-1]} components, the {domain} needs {d}: "
            f"{read}, expected {_layout(order, {'d': d})}"
            f"{_axes_hint(shape, order, {'d': d}, say['axes'])}"
        )
    n_t, n = arr.shape[:2]
    if n_t == 0 or n == 0:
        raise SchemaError(f"no snapshots or no particles: {read}: {n_t} times, {n} particles")
    sizes = {} if angles else {"d": d}
    if file_times is not None:
        if times is not None or dt is not None:
            raise ConfigError(
                say["times"] if times is not None else say["dt"],
                f"{src} holds its own times ({t_what}); give no {say['times']} or {say['dt']}",
            )
        t, given = _real(file_times, t_what).reshape(-1), t_what
    elif times is not None:
        t, given = _real(times, "the times").reshape(-1), say["times"]
    elif dt is not None:
        t, given = dt * np.arange(n_t), None  # as many times as the time axis has: nothing to check
    else:
        raise SchemaError(
            f"no times: {src} has none (keys 'time', 't'); give the snapshot times with "
            f"{say['times']} or their spacing with {say['dt']}"
        )
    if given is not None and t.size != n_t:
        sizes["time"] = t.size
        raise SchemaError(
            f"{t.size} times for {n_t} snapshots: {read}; with {t.size} times ({given}) "
            f"expected {_layout(order, sizes)}{_axes_hint(shape, order, sizes, say['axes'])}"
        )
    w = np.full(n, 1.0 / n) if weight is None else _real(weight, w_what).reshape(-1)
    if w.size != n:
        sizes.update({"n": w.size})
        raise SchemaError(
            f"{w.size} weights ({w_what}) for {n} particles: {read}; with {w.size} weights "
            f"expected {_layout(order, sizes)}{_axes_hint(shape, order, sizes, say['axes'])}"
        )
    if given is None and weight is None and layout is None:  # nothing counts the axes: --dt alone
        _check_unconfirmed_layout(t, dt, n, shape, order, sizes, read, stamp, say, notify)
    if angles:
        if degrees:
            arr = np.deg2rad(arr)
        _check_angles(arr, what, degrees=degrees, option=say["degrees"])
        arr = from_angles(arr)
    _check_unit_rows(arr, what, order, angles=angles)
    extra = {k: v for k, v in attrs.items() if stamp is None or k not in ("model", "beta")}
    if stamp is not None:
        extra["model_source"] = stamp["source"]
    extra["source_layout"] = f"shape {shape} read as ({', '.join(order)})"
    ds = particle_dataset(
        t,
        arr,
        w,
        domain=domain,
        attrs={"source": str(source), **extra},
        weight_long_name=CONVERTED_WEIGHT_LONG_NAME,
        model=None if stamp is None else stamp["model"],
        config=None if stamp is None else stamp["config"],
    )
    if (
        stamp is not None and stamp["slices"] is not None
    ):  # usa_av: the labels and masses of the slices
        xi, xi_weight = stamp["slices"]
        ds["slice_xi"] = PARTICLE_VARIABLES["slice_xi"].entry(np.asarray(xi, dtype=float))
        ds["slice_weight"] = PARTICLE_VARIABLES["slice_weight"].entry(
            np.asarray(xi_weight, dtype=float)
        )
    validate_particles(ds, name=str(source))
    return ds


def converted_summary(ds: Any) -> str:
    """What :func:`convert_particles` read, in words for its "wrote" line: "41 times, t = 0 .. 40,
    dt 1; 1000 particles; d = 3; shape (41, 1000, 3) read as (time, n, d)" (the spacing when the
    times are evenly spaced, to 1e-9 relative)."""
    t = np.asarray(ds["time"].values, dtype=float)
    span = f"t = {t[0]:g}" if t.size == 1 else f"t = {t[0]:g} .. {t[-1]:g}"
    steps = np.diff(t)
    if steps.size and np.all(np.abs(steps - steps[0]) <= 1e-9 * max(abs(steps[0]), abs(t[-1]))):
        span += f", dt {steps[0]:g}"
    n = ds.sizes["particle"]
    words = [
        f"{t.size} time{'s' if t.size != 1 else ''}, {span}",
        f"{n} particle{'s' if n != 1 else ''}",
        f"d = {ds.sizes['component']}",
    ]
    if "source_layout" in ds.attrs:
        words.append(str(ds.attrs["source_layout"]))
    return "; ".join(words)


def _check_unconfirmed_layout(
    t: Any,
    dt: float,
    n: int,
    shape: tuple[int, ...],
    order: tuple[str, ...],
    sizes: Mapping[str, int],
    read: str,
    stamp: dict[str, Any] | None,
    say: Mapping[str, str],
    notify: Callable[[str, str], None] | None,
) -> None:
    """The checks of an array whose axes nothing counts (times t_k = k dt from ``dt`` alone, no
    weights, no ``axes``): no guess from the shape alone.

    With a configuration (``stamp``), the times must end by its ``time.t_end`` (to
    :data:`SPAN_TOLERANCE`): a time axis longer than t_end / dt + 1 is refused in one line naming
    the shape read, the shape expected and the ``axes`` that fits (an (n, time, d) array read
    as (time, n, d) has n times); ``axes`` stating the layout lifts the check. Otherwise, when
    the time axis is longer than the particle axis, ``notify("layout", ...)`` says how the array
    was read and that ``axes`` reads another layout (the module's logger when ``notify`` is
    None)."""
    n_t = t.size
    if stamp is not None:
        t_end = stamp["t_end"]
        limit = t_end + SPAN_TOLERANCE * max(1.0, t_end)
        if t[-1] > limit:
            most = int(np.floor(limit / dt)) + 1
            hint = _axes_hint(shape, order, sizes, say["axes"], at_most={"time": most})
            raise SchemaError(
                f"{n_t} times of spacing {dt:g} ({say['dt']}) end at t = {t[-1]:g}, after t_end = "
                f"{t_end:g} of {stamp['named']}: {read}; up to t_end fit at most "
                f"{most} times, expected {_layout(order, {**sizes, 'time': f'<= {most}'})}{hint} "
                f"({say['axes']} {','.join(order)} keeps this reading)"
            )
    if n_t > n:
        other = ",".join("n" if a == "time" else "time" if a == "n" else a for a in order)
        message = (
            f"{read}: {n_t} times x {n} particles, more times than particles ({say['dt']} gives no "
            f"count of times to check); give {say['axes']} if the array is another layout, e.g. "
            f"{say['axes']} {other}"
        )
        if notify is None:
            logger.info(message)
        else:
            notify("layout", message)


def _check_angles(theta: Any, what: str, *, degrees: bool, option: str) -> None:
    """Refuse angles (radians) not all in [-pi, pi] and not all in [0, 2 pi], to
    :data:`ANGLE_SLACK`: degrees read as radians, or unwrapped angles. NaN is left to the
    position check."""
    finite = theta[np.isfinite(theta)]
    if finite.size == 0:
        return
    lo, hi = float(finite.min()), float(finite.max())
    if (lo >= -np.pi - ANGLE_SLACK and hi <= np.pi + ANGLE_SLACK) or (
        lo >= -ANGLE_SLACK and hi <= 2 * np.pi + ANGLE_SLACK
    ):
        return
    if degrees:
        raise SchemaError(
            f"{what}: angles range over [{np.rad2deg(lo):.6g}, {np.rad2deg(hi):.6g}] degrees, "
            "outside [-180, 180] and [0, 360]; wrap them into [0, 360) first"
        )
    raise SchemaError(
        f"{what}: angles range over [{lo:.6g}, {hi:.6g}], outside [-pi, pi] and [0, 2 pi]: "
        f"angles in degrees need {option}; unwrapped radians must be wrapped into [0, 2 pi) "
        "first (theta % (2 pi))"
    )


def _check_unit_rows(x: Any, what: str, order: tuple[str, ...], *, angles: bool) -> None:
    """Refuse positions ``x`` (time, n, d) that are not finite unit vectors to
    :data:`UNIT_TOLERANCE`, naming the worst row by its index in the array as read (``order``)."""

    def row(k: int, i: int) -> str:
        index = {"time": k, "n": i}
        return f"[{', '.join(str(index[a]) for a in order if a != 'd')}] (time {k}, particle {i})"

    bad = ~np.all(np.isfinite(x), axis=-1)
    if bad.any():
        k, i = np.argwhere(bad)[0]
        raise SchemaError(
            f"{what}: {'angles' if angles else 'positions'} hold NaN or infinite values "
            f"(the first at {row(k, i)})"
        )
    with np.errstate(all="ignore"):
        norm = np.linalg.norm(x, axis=-1)
    dev = np.abs(norm - 1.0)
    k, i = np.unravel_index(int(np.argmax(dev)), dev.shape)
    if dev[k, i] > UNIT_TOLERANCE:
        raise SchemaError(
            f"{what}: positions are not unit vectors to {UNIT_TOLERANCE:g}: the worst row "
            f"is {row(k, i)}, of norm {norm[k, i]:.9g}"
        )


def _model_stamp(config: Any, domain: str | None, attrs: dict[str, Any]) -> dict[str, Any]:
    """The model of ``config`` (a RunConfig or a TOML path) for :func:`convert_particles`:
    ``model``, ``config`` (TOML text), ``domain``, ``slices`` ((xi, xi_weight) or None) and
    ``source`` (where it came from), checked against ``domain`` and ``attrs``' model and beta."""
    source = "the given configuration"
    if not isinstance(config, RunConfig):
        source = str(config)
        config = load_config(config)
    model = Problem.from_config(config).model
    where = "--config" if source == "the given configuration" else source
    if domain is not None and domain != config.domain.name:
        raise ConfigError(
            "domain",
            f"{domain!r} disagrees with the configuration {where}, which is on the "
            f"{config.domain.name}",
        )
    if "model" in attrs and str(attrs["model"]) != model.name:
        raise ConfigError(
            "model",
            f"{attrs['model']!r} disagrees with the configuration {where} "
            f"(model {model.name!r}); give one of them",
        )
    if "beta" in attrs and abs(float(attrs["beta"]) - float(model.beta)) > 1e-12 * abs(
        float(model.beta)
    ):
        raise ConfigError(
            "beta",
            f"{float(attrs['beta']):g} disagrees with the configuration {where} "
            f"(beta = {float(model.beta):g}); give one of them",
        )
    aux = model.auxiliary
    return {
        "model": model,
        "config": config.to_toml(),
        "domain": config.domain.name,
        "slices": None if aux is None else (aux.xi, aux.weight),
        "source": f"stamped from {source} by convert-particles",
        "named": source if source == "the given configuration" else f"the configuration {source}",
        "t_end": float(config.time.t_end),
    }
