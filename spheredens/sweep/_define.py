"""A sweep's definition: the sweep file read and validated into its cases.

:func:`load_sweep` reads the TOML file, :func:`sweep_from_dict` makes one validated
configuration per combination of the varied values (a :class:`SweepCase`) and refuses, before
any work, what could not be run or combined (see :mod:`spheredens.sweep`).
:func:`case_status` tells whether a case's file is done; :func:`check_sweep_output` and
:func:`check_dashboard_address` check what the sweep will write and listen on.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .._validate import as_str, as_table, check_keys
from ..config import RunConfig, config_from_dict, load_config, read_toml
from ..exceptions import ConfigError, SpheredensError
from ..io import check_output_location, open_run
from ..runner import same_run

COMBINED_VARIABLES = ("mass", "min_rho", "energy", "w2_projection", "w2_terminal")

#: names the combined dataset uses itself: no varied key's dimension may take one
RESERVED_NAMES = ("time", "row", "col", "rho", "weight", *COMBINED_VARIABLES)

#: where the local cluster's dashboard listens unless the user names an address
DEFAULT_DASHBOARD_ADDRESS = "127.0.0.1:0"

#: how many characters of a value the messages show
SHOWN_VALUE_CHARS = 60


@dataclass(frozen=True)
class SweepCase:
    """One case: its name, the values of the varied keys, its validated configuration."""

    name: str
    values: tuple[tuple[str, Any], ...]
    config: RunConfig

    @property
    def path(self) -> Path:
        path = self.config.output_path()
        assert path is not None
        return path


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: the cases and where their files go."""

    cases: tuple[SweepCase, ...]
    keys: tuple[str, ...]
    levels: tuple[tuple[Any, ...], ...]
    output_dir: Path
    combined_path: Path


def _dim_name(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _case_name(values: tuple[tuple[str, Any], ...]) -> str:
    parts = [f"{_dim_name(k)}-{v}" for k, v in values]
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", "_".join(parts)) or "case"


def _normal(value: Any) -> Any:
    """A hashable form of a sweep value in which values equal as numbers are equal: ``2`` and
    ``2.0``, ``0.0`` and ``-0.0`` (Python's numeric equality and hash); lists become tuples,
    tables sorted tuples; booleans stay apart from the numbers 0 and 1."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_normal(v) for v in value))
    if isinstance(value, Mapping):
        return ("table", tuple(sorted((str(k), _normal(v)) for k, v in value.items())))
    return value


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str))


def _label(value: Any) -> str:
    """A value as written in the sweep file (TOML arrays and numbers read as JSON does):
    ``[[1.0, 0.0], [0.0, 0.5]]``, ``2``, ``2.0``, ``-0.0``."""
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _shown(value: Any) -> str:
    """:func:`_label`, cut to :data:`SHOWN_VALUE_CHARS` characters for a message."""
    text = _label(value)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file (the argument of ``spheredens sweep SWEEP``).

    A sweep file names a base configuration and the values to vary (``[vary]`` with dotted
    keys, e.g. ``"model.beta" = [10.0, 30.0]``); every combination is a case, and every case
    configuration is validated here, before any work.

    Parameters
    ----------
    path : path
        The sweep file (TOML); ``base`` and ``output_dir`` are relative to its folder.

    Returns
    -------
    Sweep
        ``cases`` (each with ``name``, ``values`` and its ``config``), ``keys``, ``levels``,
        ``output_dir`` and ``combined_path``.

    Example
    -------
    >>> import spheredens as sd
    >>> sweep = sd.load_sweep("runs/concentration/sweep_circle_n1024.toml")
    >>> names = [case.name for case in sweep.cases]          # beta-10.0, beta-30.0, ...
    """
    path = Path(path)
    return sweep_from_dict(read_toml(path, "sweep file"), base_dir=path.resolve().parent)


#: the most cases of one sweep (the product of the numbers of values varied)
MAX_SWEEP_CASES = 10000


def sweep_from_dict(data: Mapping[str, Any], *, base_dir: str | Path = ".") -> Sweep:
    base_dir = Path(base_dir)
    check_keys(data, ["base", "output_dir", "combined", "vary"], "sweep")
    if "base" not in data:
        raise ConfigError("sweep.base", "is required: the base configuration file, or a table")
    if isinstance(data["base"], str):
        base_path = (
            Path(data["base"]) if Path(data["base"]).is_absolute() else base_dir / data["base"]
        )
        load_config(base_path)  # validated as it is, then varied from its own tables
        base = read_toml(base_path, "base configuration")
        base_cfg_dir = base_path.resolve().parent
    else:
        base = as_table(data["base"], "sweep.base")
        base_cfg_dir = base_dir
    output_dir = base_dir / as_str(data.get("output_dir", "cases"), "sweep.output_dir")
    combined = output_dir / as_str(data.get("combined", "combined.nc"), "sweep.combined")
    if combined.suffix != ".nc":
        raise ConfigError(
            "sweep.combined", f"= {combined.name!r} must end in '.nc' (a netCDF file)"
        )
    vary = as_table(data.get("vary", {}), "sweep.vary")
    if not vary:
        raise ConfigError(
            "sweep.vary", 'give at least one key to vary, e.g. "model.beta" = [10.0, 30.0]'
        )
    keys, levels = [], []
    for key, values in vary.items():
        if "." not in key:
            raise ConfigError(
                f"sweep.vary.{key}", "use a dotted key 'section.key', e.g. \"model.beta\""
            )
        if not isinstance(values, list) or not values:
            raise ConfigError(
                f"sweep.vary.{key}", f"must be a non-empty list of values, got {_shown(values)}"
            )
        if key.partition(".")[0] == "output":
            raise ConfigError(
                f"sweep.vary.{key}",
                "is set by the sweep itself (each case writes "
                "output_dir/<case>.nc, without a figure): vary other keys",
            )
        seen: dict[Any, Any] = {}
        for value in values:
            normal = _normal(value)
            try:
                earlier = seen.get(normal, seen)
            except TypeError:  # not hashable (cannot happen for TOML values): compare by text
                normal = _label(value)
                earlier = seen.get(normal, seen)
            if earlier is not seen:
                same = (
                    "the same value twice"
                    if _label(earlier) == _label(value)
                    else "equal as numbers"
                )
                raise ConfigError(
                    f"sweep.vary.{key}",
                    f"repeats a value: {_shown(earlier)} and "
                    f"{_shown(value)} are {same}; list each value once",
                )
            seen[normal] = value
        dim = _dim_name(key)
        if dim in RESERVED_NAMES:
            raise ConfigError(
                f"sweep.vary.{key}",
                f"would name a dimension {dim!r} of the combined "
                f"dataset, which has a {dim!r} of its own; run one sweep per value of it",
            )
        keys.append(key)
        levels.append(tuple(values))
    if len({_dim_name(k) for k in keys}) != len(keys):
        raise ConfigError(
            "sweep.vary",
            "two varied keys end in the same name; the combined dataset "
            "names its dimensions after the last component of each key",
        )
    count = math.prod(len(v) for v in levels)
    if count > MAX_SWEEP_CASES:  # each case is a run and a file, validated before any runs
        raise ConfigError(
            "sweep.vary",
            f"{count} cases ({' x '.join(str(len(v)) for v in levels)}), more "
            f"than {MAX_SWEEP_CASES} (each a run and its file); vary fewer values, or split "
            "the sweep",
        )
    cases = []
    for combo in itertools.product(*levels):
        values = tuple(zip(keys, combo))
        name = _case_name(values)
        table = {s: dict(t) for s, t in base.items()}
        for key, value in values:
            section, _, item = key.partition(".")
            table.setdefault(section, {})[item] = value
        table.setdefault("output", {})["path"] = str((output_dir / f"{name}.nc").resolve())
        table["output"]["figure"] = False
        try:
            cfg = config_from_dict(table, base_dir=base_cfg_dir)
        except ConfigError as exc:
            raise ConfigError(f"sweep case {name}", str(exc)) from None
        cfg.check_resolution(
            key=f"sweep case {name}",
            warn=False,
            fix="refine the grid or set discretization.allow_underresolved = true in the base",
        )
        cases.append(SweepCase(name, values, cfg))
    _check_combinable(cases, keys)
    owner: dict[Path, Any] = {combined.resolve(): "the combined file"}
    for case in cases:  # two cases (or a case and the combined file) on one file: refused now
        other = owner.setdefault(case.path, case)
        if other is not case:
            other = other if isinstance(other, str) else f"case {other.name} ({dict(other.values)})"
            raise ConfigError(
                f"sweep case {case.name}",
                f"writes {str(case.path)!r}, as {other} "
                "does (their names coincide once made file names); vary other values "
                "or rename the combined file",
            )
    return Sweep(tuple(cases), tuple(keys), tuple(levels), output_dir, combined)


def _differing_key(a: SweepCase, b: SweepCase, keys: list[str], prefer: str = "") -> str:
    """The first varied key whose values differ between two cases (one starting with
    ``prefer`` first)."""
    differ = [k for (k, va), (_, vb) in zip(a.values, b.values) if _normal(va) != _normal(vb)]
    return next((k for k in differ if k.startswith(prefer)), differ[0] if differ else keys[0])


def _check_combinable(cases: list[SweepCase], keys: list[str]) -> None:
    """Refuse, before any case runs, what the combined dataset could not hold: cases with
    other snapshot times, two cases of one configuration (values equal once validated)."""
    times = cases[0].config.time.snapshot_times()
    for case in cases[1:]:
        other = case.config.time.snapshot_times()
        if other != times:
            key = _differing_key(cases[0], case, keys, prefer="time.")
            raise ConfigError(
                f"sweep.vary.{key}",
                f"changes the snapshot times (case {cases[0].name}: "
                f"{len(times)} to t = {times[-1]:g}; case {case.name}: {len(other)} to "
                f"t = {other[-1]:g}); combined.nc needs the same times in every case: "
                "run one sweep per value of it",
            )
    seen: dict[str, SweepCase] = {}
    for case in cases:
        table = case.config.to_dict()
        table.pop("output", None)
        text = json.dumps(table, sort_keys=True, default=str)
        if text in seen:
            first = seen[text]
            key = _differing_key(first, case, keys)
            va, vb = dict(first.values)[key], dict(case.values)[key]
            raise ConfigError(
                f"sweep.vary.{key}",
                f"{_shown(va)} and {_shown(vb)} give the same run "
                f"(cases {first.name} and {case.name} have one configuration once "
                "validated); list each value once",
            )
        seen[text] = case


def case_status(case: SweepCase) -> str:
    """``"done"`` (a complete file of this configuration), ``"partial"`` or ``"todo"``."""
    if not case.path.exists():
        return "todo"
    try:
        ds = open_run(case.path)
    except SpheredensError:
        return "partial"
    if not same_run(ds.attrs.get("config", ""), case.config):
        raise ConfigError(
            f"sweep case {case.name}",
            f"{str(case.path)!r} holds a different run; move it away or choose another output_dir",
        )
    return "done" if ds.attrs.get("run_status") == "complete" else "partial"


def check_sweep_output(
    sweep: Sweep, *, mkdir: bool = False, mkdir_hint: str = "mkdir=True"
) -> None:
    """Check, before any work, that the sweep can write its files.

    The sweep writes into its own folder ``output_dir``, which it creates when missing; the
    folder holding it must exist (or ``mkdir`` creates the missing parents) and be writable
    (:func:`~spheredens.io.check_output_location` on the combined file).

    Raises
    ------
    ConfigError
        Key ``sweep.output_dir``: the folder cannot be created or written (one line).
    """
    out = sweep.output_dir
    own = not out.exists() and out.parent.is_dir()  # the sweep's own folder, one level
    check_output_location(
        sweep.combined_path, mkdir=mkdir or own, key="sweep.output_dir", mkdir_hint=mkdir_hint
    )


def check_dashboard_address(address: Any, key: str = "dashboard_address") -> str:
    """``address`` when it is ``host:port`` (host may be empty: every interface; port 0..65535,
    0 a free one), else ConfigError naming ``key``."""
    host, sep, port = str(address).rpartition(":") if isinstance(address, str) else ("", "", "")
    if not sep or not port.isdigit() or int(port) > 65535 or any(c.isspace() for c in host):
        raise ConfigError(
            key,
            f"= {_shown(address)} is not host:port, e.g. 127.0.0.1:8787 (this "
            "machine only) or :8787 (every interface)",
        )
    return address
