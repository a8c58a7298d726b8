"""Stored reference numbers: every numeric variable of one short run per combination.

Every case is a short run through the public API (``sd.load_config`` / ``sd.config_from_dict``
and ``sd.run``), one per (domain, scheme, evaluator) combination and model family, plus the
``make demo`` run of example C. :func:`numbers` returns every numeric variable of the run's
Dataset and its non-volatile attributes; ``tests/data/reference_numbers.npz`` holds them as
computed on main at commit 444443e, written by

    .venv/bin/python tests/reference_cases.py --write

and ``tests/test_reference_numbers.py`` recomputes them and compares to 1e-12. A deliberate
change of some variables' formula replaces only those, on every case, by

    .venv/bin/python tests/reference_cases.py --update w2_projection w2_terminal

(done twice so far: for the W2 representation, and for the CF cell bounds and measures with
``--update theta_bounds cell_area lat_bounds lon_bounds``; see ``tests/test_reference_numbers.py``).
Attributes the same way, named ``attr:NAME`` (for the faithfulness attributes:
``--update attr:unfaithful_from_t attr:unfaithful_min_rho attr:unfaithful_max_rho``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "reference_numbers.npz"

EXAMPLE_C = {
    "Q": [[1.0, 0.0], [0.0, 1.0]],
    "K": [[1.75, 0.866025], [0.433013, 2.5]],
    "V": [[1.0, 0.0], [0.0, 0.5]],
}
#: circle: B = 1.3 R(0.4) (the FFT evaluator applies)
ROT_2D = {
    "K": [[1.3 * np.cos(0.4), -1.3 * np.sin(0.4)], [1.3 * np.sin(0.4), 1.3 * np.cos(0.4)]],
    "V": [[1.0, 0.2], [0.1, 0.6]],
}
#: sphere: B = 1.2 R (Funk-Hecke applies), and a general B (kappa interpolation / direct)
_R = [
    [0.8440296287459854, -0.2931284138572723, 0.44909878511128687],
    [0.44909878511128687, 0.8440296287459854, -0.2931284138572723],
    [-0.2931284138572723, 0.44909878511128687, 0.8440296287459854],
]
ROT_3D = {
    "K": [[1.2 * v for v in row] for row in _R],
    "V": [[1.0, 0.2, 0.0], [0.1, 0.7, -0.3], [0.0, 0.4, 0.5]],
}
GENERAL_3D = {
    "K": [[1.1, 0.3, 0.0], [0.2, 0.9, 0.1], [0.0, -0.2, 1.4]],
    "V": [[1.0, 0.2, 0.0], [0.1, 0.7, -0.3], [0.0, 0.4, 0.5]],
}
VMF_2D = {
    "name": "von_mises_fisher",
    "means": [[0.0, 1.0], [1.0, 0.0]],
    "kappas": [2.0, 4.0],
    "weights": [0.7, 0.3],
}
SMOOTH_3D = {"name": "random_smooth", "seed": 7, "bandwidth": 3, "amplitude": 0.8}
ROPE = {
    "kernel": "rope",
    "slices": 4,
    "omega": 6.283185307179586,
    "slice_perturbation": 0.5,
    "slice_seed": 0,
}


def _case(domain, model, initial, disc, t_end, snapshots=3, auxiliary=None):
    data = {
        "model": model,
        "domain": {"name": domain},
        "initial": initial,
        "discretization": disc,
        "time": {"t_end": t_end, "snapshots": snapshots},
    }
    if auxiliary is not None:
        data["auxiliary"] = auxiliary
    return data


def cases() -> dict[str, dict]:
    """name -> configuration (a nested dict), the ``demo`` case excepted."""
    sa = lambda beta, mats: {"name": "sa", "beta": beta, **mats}  # noqa: E731
    zt = lambda mats: {"name": "sa_zero_temperature", **mats}  # noqa: E731
    out = {}
    for scheme in ("fv", "fourier"):
        out[f"circle_{scheme}_direct"] = _case(
            "circle",
            sa(10.0, EXAMPLE_C),
            VMF_2D,
            {"scheme": scheme, "n": 128, "interaction": "direct"},
            1.0,
        )
        out[f"circle_{scheme}_fft"] = _case(
            "circle",
            sa(10.0, ROT_2D),
            VMF_2D,
            {"scheme": scheme, "n": 128, "interaction": "fft"},
            1.0,
        )
        out[f"circle_{scheme}_zero_temperature"] = _case(
            "circle", zt(EXAMPLE_C), VMF_2D, {"scheme": scheme, "n": 128}, 1.0
        )
        out[f"circle_{scheme}_usa"] = _case(
            "circle",
            {"name": "usa", "beta": 2.0, **ROT_2D},
            VMF_2D,
            {"scheme": scheme, "n": 64},
            0.5,
        )
        out[f"circle_{scheme}_usa_av"] = _case(
            "circle",
            {"name": "usa_av", "beta": 1.0},
            {"name": "uniform"},
            {"scheme": scheme, "n": 64},
            0.5,
            auxiliary=ROPE,
        )
    for interaction in ("funk_hecke", "kappa_interpolation", "direct"):
        mats = ROT_3D if interaction == "funk_hecke" else GENERAL_3D
        out[f"sphere_sh_spectral_{interaction}"] = _case(
            "sphere",
            sa(4.0, mats),
            SMOOTH_3D,
            {"scheme": "sh_spectral", "lmax": 15, "interaction": interaction},
            0.3,
        )
    for interaction in ("funk_hecke", "direct"):
        mats = ROT_3D if interaction == "funk_hecke" else GENERAL_3D
        out[f"sphere_fv_{interaction}"] = _case(
            "sphere",
            sa(2.0, mats),
            SMOOTH_3D,
            {"scheme": "fv", "nlat": 18, "interaction": interaction},
            0.3,
        )
    for scheme, res in (("sh_spectral", {"lmax": 15}), ("fv", {"nlat": 12})):
        out[f"sphere_{scheme}_zero_temperature"] = _case(
            "sphere", zt(GENERAL_3D), SMOOTH_3D, {"scheme": scheme, **res}, 0.3
        )
        out[f"sphere_{scheme}_usa"] = _case(
            "sphere",
            {"name": "usa", "beta": 1.0, **ROT_3D},
            SMOOTH_3D,
            {"scheme": scheme, **res},
            0.2,
        )
        out[f"sphere_{scheme}_usa_av"] = _case(
            "sphere",
            {"name": "usa_av", "beta": 1.0},
            {"name": "uniform"},
            {"scheme": scheme, **res},
            0.2,
            auxiliary=ROPE,
        )
    return out


#: attributes that change from run to run or from version to version
VOLATILE_ATTRS = {
    "spheredens_version",
    "history",
    "wall_time_seconds",
    "created",
    "date_created",
    "checkpoint_wall_time",
    "checkpoint_wall_seconds",
    "wall_time_total_seconds",
    # the sha256 of the checkpoint and snapshots, compared number by number (to RTOL)
    "checkpoint_sha256",
}


def numbers(ds) -> dict[str, np.ndarray]:
    """Every numeric variable and coordinate of a Dataset, and its stable attributes as JSON."""
    out = {}
    for name in list(ds.data_vars) + list(ds.coords):
        values = np.asarray(ds[name].values)
        if values.dtype.kind in "fciub":
            out[f"var:{name}"] = values
    attrs = {
        k: (
            _stable_config(v)
            if k == "config"
            else v.tolist()
            if isinstance(v, np.ndarray)
            else v.item()
            if isinstance(v, np.generic)
            else v
        )
        for k, v in ds.attrs.items()
        if k not in VOLATILE_ATTRS
    }
    out["attrs"] = np.array(json.dumps(attrs, sort_keys=True, default=str))
    return out


def _stable_config(text: str) -> str:
    """The stored configuration without what names the output file's place (its path, and the
    comment naming the base folder)."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return "\n".join("path = <output>" if line.startswith("path = ") else line for line in lines)


def run_case(name: str, folder: Path):
    """Run a case, writing its file in ``folder``, and return the file read back (loaded)."""
    import xarray as xr

    import spheredens as sd

    if name == "demo":
        cfg = sd.load_config(ROOT / "runs" / "circle_example_c" / "config.toml")
    else:
        cfg = sd.config_from_dict(cases()[name])
    path = Path(folder) / f"{name}.nc"
    sd.run(cfg, output=path, progress=False)
    with xr.open_dataset(path) as ds:
        return ds.load()


def all_names() -> list[str]:
    return ["demo", *cases()]


def write() -> None:
    import tempfile

    stored = {}
    folder = tempfile.mkdtemp()
    for name in all_names():
        for key, value in numbers(run_case(name, folder)).items():
            stored[f"{name}|{key}"] = value
        print("computed", name, flush=True)
    DATA.parent.mkdir(exist_ok=True)
    np.savez_compressed(DATA, **stored)
    print("wrote", DATA)


def update(variables: list[str]) -> None:
    """Recompute every case and replace only ``variables`` (e.g. ``w2_projection``; an attribute
    as ``attr:NAME``) in the stored file, keeping every other stored number and attribute as it
    was; a listed variable or attribute a case now has and did not have is added, one it no
    longer has is removed."""
    import tempfile

    with np.load(DATA) as f:
        stored = {k: f[k] for k in f.files}
    folder = tempfile.mkdtemp()
    for name in all_names():
        after = numbers(run_case(name, folder))
        attrs_after = json.loads(str(after["attrs"]))
        attrs = json.loads(str(stored[f"{name}|attrs"]))
        for var in variables:
            if var.startswith("attr:"):
                attr = var.split(":", 1)[1]
                if attr in attrs_after:
                    attrs[attr] = attrs_after[attr]
                else:
                    attrs.pop(attr, None)
                continue
            key = f"{name}|var:{var}"
            if f"var:{var}" in after:  # replaced, or added where the layout gained it
                stored[key] = after[f"var:{var}"]
            else:
                stored.pop(key, None)
        stored[f"{name}|attrs"] = np.array(json.dumps(attrs, sort_keys=True, default=str))
        print("updated", name, flush=True)
    np.savez_compressed(DATA, **stored)
    print("wrote", DATA)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    elif sys.argv[1:2] == ["--update"] and sys.argv[2:]:
        update(sys.argv[2:])
    else:
        print(__doc__)
