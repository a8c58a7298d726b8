"""TOML in and out: reading a TOML file into its tables (one-line refusals of what is not a
configuration), and writing a configuration back as TOML text with every default."""

from __future__ import annotations

import json
import math
import sys
import tomllib
from pathlib import Path
from typing import Any

from ._validate import MAX_DEPTH, check_depth, input_file_problem
from .exceptions import PATH_LIMIT, ConfigError, shown

#: the largest TOML file read (a configuration or sweep is a few kB of text)
MAX_TOML_BYTES = 64 * 2**20


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The tables of a TOML file; a one-line ConfigError when it is missing, not a regular file
    (a directory, /dev/null, a symbolic link loop, a name too long), too large, not UTF-8 text,
    not TOML, or nested too deeply (:func:`~spheredens._validate.check_depth`)."""
    path = Path(path)
    name = shown(str(path), PATH_LIMIT)
    problem = input_file_problem(path)
    if problem:
        raise ConfigError("", f"{what} {name} {problem}")
    size = path.stat().st_size
    if size > MAX_TOML_BYTES:
        raise ConfigError(
            "",
            f"{what} {name} is {size / 2**20:.0f} MiB, more than a TOML file of "
            f"spheredens can be ({MAX_TOML_BYTES // 2**20} MiB); give the configuration file",
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "",
            f"{name} is not valid TOML: it is not UTF-8 text (byte "
            f"0x{exc.object[exc.start : exc.start + 1].hex()} at position {exc.start})",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"{name} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            "",
            f"{name} is not a configuration: its arrays or tables are nested "
            f"hundreds of levels deep (a configuration needs a few; at most {MAX_DEPTH})",
        ) from None
    except ValueError:  # an integer of more than 4300 digits (sys.get_int_max_str_digits)
        raise ConfigError(
            "",
            f"{name} is not a configuration: it holds an integer of more than "
            f"{sys.get_int_max_str_digits()} digits",
        ) from None
    except MemoryError:
        raise ConfigError(
            "", f"{what} {name} ({size / 2**20:.0f} MiB) is too large to read into memory"
        ) from None
    except OSError as exc:
        raise ConfigError("", f"cannot read {what} {name} ({exc.strerror or exc})") from None
    check_depth(data)
    return data


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The tables of a configuration (a :class:`~spheredens.config.RunConfig`), every default
    written out."""
    m = cfg.model
    model: dict[str, Any] = {"name": m.name, "beta": m.beta}
    if m.meridian:  # the zonal domain's 2 x 2 reductions: B = diag(a, b), V = diag(l1, l2)
        B = [[sum(m.Q[k][i] * m.K[k][j] for k in range(2)) for j in range(2)] for i in range(2)]
        model.update(a=B[0][0], b=B[1][1], l1=m.V[0][0], l2=m.V[1][1])
    else:
        model.update(Q=[list(r) for r in m.Q], K=[list(r) for r in m.K], V=[list(r) for r in m.V])
    time: dict[str, Any] = {"t_end": cfg.time.t_end, "cfl": cfg.time.cfl}
    if cfg.time.max_dt is not None:
        time["max_dt"] = cfg.time.max_dt
    if cfg.time.times is not None:
        time["times"] = list(cfg.time.times)
    else:
        time["snapshots"] = cfg.time.snapshots
    output: dict[str, Any] = {"figure": cfg.output.figure}
    if cfg.output.path is not None:
        output["path"] = cfg.output.path
    out = {
        "model": model,
        "domain": {"name": cfg.domain.name, **cfg.domain.parameters()},
        "initial": {"name": cfg.initial.name, **cfg.initial.density.to_params()},
        "discretization": {"scheme": cfg.discretization.scheme, **dict(cfg.discretization.options)},
        "time": time,
        "output": output,
    }
    if cfg.model.auxiliary is not None:
        out["auxiliary"] = cfg.model.auxiliary.to_params()
    if cfg.particles is not None:
        p = cfg.particles
        out["particles"] = {
            "n": p.n,
            "seed": p.seed,
            "initialization": p.initialization,
            "dt": p.dt,
            "integrator": p.integrator,
            **({"path": p.path} if p.path else {}),
            **(
                {"stop_after_departure": p.stop_after_departure}
                if p.stop_after_departure is not None
                else {}
            ),
        }
    return out


def toml_value(v: Any) -> str:
    """``v`` (a bool, number, string or list of them) as a TOML value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def config_to_toml(cfg: Any) -> str:
    """TOML text of a configuration (every default written out)."""
    lines = [
        f"# spheredens run configuration; relative paths are relative to {str(cfg.base_dir)!r}"
    ]
    for section, table in config_to_dict(cfg).items():
        lines.append(f"\n[{section}]")
        lines.extend(f"{k} = {toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"
