"""Every example of the docs runs.

* Every ```toml block of README.md and docs/**/*.md is validated: a sweep file (top-level
  ``base`` or ``[vary]``) by the sweep loader, anything else as a run configuration, with the
  resolution rule of ``spheredens run``. A block that is deliberately a fragment is marked in
  the page by the line ``<!-- fragment -->`` just before it, and only those are skipped.
* Every ```python block of README.md and docs/**/*.md runs, in order, in a temporary folder
  holding copies of the ``runs/`` files it names, at reduced sizes: each run, particle run and
  sweep case is cut to ``t_end <= T_END`` with at most ``SNAPSHOTS`` snapshots and
  ``PARTICLES`` particles (:func:`small`), and a sweep keeps the first ``SWEEP_LEVELS`` values
  of each varied key, by wrapping ``spheredens.load_config`` and the functions behind
  ``sd.run``, ``sd.run_particles`` and ``sd.load_sweep``.
* The examples in the docstrings of the public functions (``sd.run``, ``sd.compare``, ...) run
  the same way, and every command has a documented function in ``spheredens.__all__``.
* The help text of the command line names only documentation files that exist.
"""

from __future__ import annotations

import dataclasses
import doctest
import functools
import re
import shutil
import tomllib
from pathlib import Path

import matplotlib
import numpy as np
import pytest

import spheredens as sd
import spheredens.particles
import spheredens.runner
import spheredens.sweep
from spheredens.cli import build_parser
from spheredens.sweep import sweep_from_dict

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FRAGMENT = "<!-- fragment -->"
T_END, SNAPSHOTS, PARTICLES, SWEEP_LEVELS = 0.2, 3, 100, 2


def blocks(language: str) -> list[tuple[Path, int, str, bool]]:
    """(page, line, code, marked as a fragment) of every fenced block in ``language``."""
    out = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == f"```{language}":
                start = i
                i += 1
                while i < len(lines) and lines[i].strip() != "```":
                    i += 1
                before = next((s.strip() for s in reversed(lines[:start]) if s.strip()), "")
                out.append(
                    (page, start + 1, "\n".join(lines[start + 1 : i]) + "\n", before == FRAGMENT)
                )
            i += 1
    return out


def block_id(block: tuple[Path, int, str, bool]) -> str:
    return f"{block[0].relative_to(ROOT)}:{block[1]}"


TOML_BLOCKS = blocks("toml")
PYTHON_BLOCKS = blocks("python")


def test_the_docs_have_examples():
    """The collection itself: README's run configuration, the contract's, README's Python."""
    names = {block_id(b).split(":")[0] for b in TOML_BLOCKS}
    assert {"README.md", "docs/config_contract.md"} <= names
    assert sum(b[0].name == "README.md" for b in PYTHON_BLOCKS) >= 2


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=block_id)
def test_toml_example_is_accepted(block):
    page, _, code, fragment = block
    if fragment:
        pytest.skip(f"marked {FRAGMENT} in the page")
    data = tomllib.loads(code)
    if "vary" in data or "base" in data:
        sweep_from_dict(data, base_dir=page.parent)
    else:
        sd.config_from_dict(data, base_dir=page.parent).check_resolution(warn=False)


def small(cfg: sd.RunConfig) -> sd.RunConfig:
    """``cfg`` cut to t_end <= T_END, at most SNAPSHOTS snapshots and PARTICLES particles."""
    t = cfg.time
    t_end = min(t.t_end, T_END)
    changes = {"time.t_end": t_end}
    if t.times is not None:
        changes["time.times"] = [v for v in t.times if v <= t_end][:SNAPSHOTS] or [0.0]
    else:
        changes["time.snapshots"] = min(t.snapshots, SNAPSHOTS)
    if cfg.particles is not None:
        changes["particles.n"] = min(cfg.particles.n, PARTICLES)
    return cfg.replace(**changes)


def _referenced_files(code: str) -> set[str]:
    return set(re.findall(r"""["'](runs/[^"']+)["']""", code))


def copy_runs(names: set[str], folder: Path) -> None:
    """Copy the TOML files named (with every TOML file of their folders: the bases of sweeps)
    from the repository to ``folder``."""
    for name in sorted(n for n in names if n.endswith(".toml")):
        for toml in (ROOT / name).parent.glob("*.toml"):
            target = folder / toml.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(toml, target)


def make_run_files(names: set[str], folder: Path) -> None:
    """Make the run files named that do not exist yet, by running (at reduced size) the
    configuration of their folder that writes them."""
    for name in sorted(n for n in names if n.endswith(".nc")):
        target = (folder / name).resolve()
        if target.exists():
            continue
        config = next(
            c
            for c in target.parent.glob("*.toml")
            if sd.load_config(c).output_path().resolve() == target
        )
        sd.run(config, progress=False)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A folder with copies of the runs/ files the examples name, the working directory of every
    example, with every run cut by :func:`small`."""
    folder = tmp_path_factory.mktemp("doc_examples")
    docstrings = "".join(getattr(sd, name).__doc__ for name in sd.COMMANDS.values())
    names = set().union(
        *(_referenced_files(code) for _, _, code, _ in PYTHON_BLOCKS), _referenced_files(docstrings)
    )
    copy_runs(names, folder)
    real_run, real_particles = spheredens.runner.run, spheredens.particles.run_particles
    real_load_config, real_load_sweep = sd.load_config, spheredens.sweep.load_sweep

    @functools.wraps(real_load_sweep)
    def small_sweep(path):
        # the sweep with the first SWEEP_LEVELS values of each varied key, its cases cut
        sweep = real_load_sweep(path)
        levels = tuple(lv[:SWEEP_LEVELS] for lv in sweep.levels)
        cases = tuple(
            dataclasses.replace(c, config=small(c.config))
            for c in sweep.cases
            if all(v in lv for lv, (_, v) in zip(levels, c.values))
        )
        return dataclasses.replace(sweep, cases=cases, levels=levels)

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        mp.setattr(sd, "load_config", lambda path: small(real_load_config(path)))

        @functools.wraps(real_run)  # the docstring stays: its example is run below
        def small_run(config, **kw):
            return real_run(small(spheredens.runner.as_config(config)), **kw)

        @functools.wraps(real_particles)
        def small_particles(config, **kw):
            return real_particles(small(config), **kw)

        # sd.run is spheredens.runner.run re-exported: each name is replaced where it is used
        for module in (sd, spheredens.runner):
            mp.setattr(module, "run", small_run)
        for module in (sd, spheredens.particles):
            mp.setattr(module, "run_particles", small_particles)
        for module in (sd, spheredens.sweep):
            mp.setattr(module, "load_sweep", small_sweep)
        make_run_files(names, folder)
        yield folder


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=block_id)
def test_python_example_runs(block, workspace):
    """Each block in a fresh namespace; the files written by earlier blocks stay. A W2 curve an
    example keeps in a variable ``w2_*`` must have values (a steady state, or a model without
    Assumption 1, gives NaN everywhere)."""
    page, line, code, fragment = block
    if fragment:
        pytest.skip(f"marked {FRAGMENT} in the page")
    namespace = {"__name__": "__doc_example__"}
    exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
    for name, value in namespace.items():
        if name.startswith("w2_"):
            assert np.isfinite(np.asarray(value, dtype=float)).any(), f"{name} is NaN everywhere"


def test_every_command_has_a_documented_function():
    """Every command (run, particles, compare, convert-particles, sweep, analyze-beta, plot and
    animate) has its function in ``spheredens.__all__``, documented with its parameters, what
    it returns and an example."""
    wanted = {
        "run",
        "run_particles",
        "compare",
        "convert_particles",
        "load_sweep",
        "run_sweep",
        "analyze_beta",
        "plot_run",
        "animate_run",
    }
    assert wanted <= set(sd.__all__) and set(sd.COMMANDS.values()) <= wanted
    for name in wanted:
        doc = getattr(sd, name).__doc__ or ""
        for section in ("Parameters\n", "Returns\n", "Example\n", ">>> "):
            assert section in doc, f"sd.{name}: no {section.strip()!r} in its docstring"
    assert all(hasattr(sd, name) for name in sd.__all__)


def test_docstring_examples_run(workspace, monkeypatch):
    """The examples of the public functions, in the order the files they read are made, sharing
    one namespace (``combined`` of run_sweep's example is analyze_beta's input)."""
    order = [
        "run",
        "run_particles",
        "compare",
        "plot_run",
        "animate_run",
        "convert_particles",
        "load_sweep",
        "run_sweep",
        "analyze_beta",
    ]
    assert set(order) == set(sd.COMMANDS.values()) | {"load_sweep"}
    own = workspace / "docstrings"  # a folder of their own: the README's examples wrote theirs
    shutil.copytree(workspace / "runs", own / "runs")
    monkeypatch.chdir(own)
    shared: dict = {}
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for name in order:
        test = doctest.DocTestParser().get_doctest(
            getattr(sd, name).__doc__, shared, f"sd.{name}", None, 0
        )
        result = runner.run(test, clear_globs=False)
        assert result.attempted > 0 and result.failed == 0, f"the example of sd.{name} fails"
        shared.update(test.globs)  # a DocTest runs in a copy of the namespace it is given


def _help_texts() -> str:
    parser = build_parser()
    texts = [parser.format_help()]
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts += [p.format_help() for p in sub.choices.values()]
    return "\n".join(texts)


def test_help_names_existing_documentation():
    """``spheredens --help`` and each command's help name docs that exist (docs/config.md,
    not a page that does not exist)."""
    names = set(re.findall(r"[\w./-]+\.md\b", _help_texts()))
    assert names, "the help names no documentation page"
    missing = sorted(n for n in names if not (ROOT / n).is_file())
    assert not missing, f"the help text names documentation that does not exist: {missing}"


def test_a_sphere_finite_volume_file_starts_a_run_as_the_docs_say(tmp_path):
    """docs/config.md and docs/config_contract.md: a sphere fv file (dim cell) is a start-from-file
    density (its cells' piecewise-constant density); a density on other dims is refused in one
    line naming the dims a sphere file may have."""
    cfg = sd.config_from_dict(
        {
            "domain": {"name": "sphere"},
            "discretization": {"scheme": "fv", "nlat": 10},
            "time": {"t_end": 0.05, "snapshots": 2},
        }
    )
    first = sd.run(cfg, output=tmp_path / "fv.nc", progress=False)
    for page in ("config.md", "config_contract.md"):
        assert re.search(r"`\(cell\)`|dim cell", (ROOT / "docs" / page).read_text(encoding="utf-8"))
    again = sd.config_from_dict(
        {
            "domain": {"name": "sphere"},
            "initial": {"name": "file", "path": "fv.nc"},
            "discretization": {"scheme": "fv", "nlat": 10},
            "time": {"t_end": 0.05, "snapshots": 2},
        },
        base_dir=tmp_path,
    )
    ds = sd.run(again, output=tmp_path / "again.nc", progress=False)
    np.testing.assert_allclose(ds["rho"].values[0], first["rho"].values[-1], rtol=1e-12, atol=0)
    first[["rho", "weight"]].isel(cell=slice(0, 50)).rename(cell="node").to_netcdf(
        tmp_path / "odd.nc"
    )
    with pytest.raises(
        sd.ConfigError,
        match=r"has dims \('node',\); a density on this domain needs "
        r"dims \('lat', 'lon'\) or \('cell',\)",
    ) as refused:
        sd.config_from_dict(
            {"domain": {"name": "sphere"}, "initial": {"name": "file", "path": "odd.nc"}},
            base_dir=tmp_path,
        )
    assert "\n" not in str(refused.value)
