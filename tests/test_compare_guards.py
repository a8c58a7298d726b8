"""compare refuses files that do not belong together.

The density and every particle file must come from one model (model, beta, Q, K, V, domain,
initial density, usa_av slice labels and weights); a mismatch is refused in one line naming
the first difference, ``--allow-mismatch`` accepts it and records it; swapped and wrong-kind
files are named; converted files without a model are compared with a one-line notice, and
``convert-particles --config`` stamps the model so that the check applies. The runs are tiny
(64 cells, 3 snapshots, 16 particles): the point is the checks, not the numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.cli import main
from spheredens.compare import compare
from spheredens.convert import convert_particles
from spheredens.exceptions import ModelMismatchError
from spheredens.io import open_particles, open_run, write_dataset
from spheredens.particles import run_particles

BASE = {
    "model": {"name": "sa", "beta": 5.0, "V": [[1.0, 0.0], [0.0, 0.5]]},
    "initial": {"name": "von_mises_fisher", "means": [[0.6, 0.8]], "kappas": [2.0]},
    "discretization": {"scheme": "fv", "n": 64},
    "time": {"t_end": 0.2, "times": [0.0, 0.1, 0.2]},
    "particles": {"n": 16, "dt": 0.1, "initialization": "quantile"},
}
AUX = {
    "model": {"name": "usa_av", "beta": 1.0},
    "initial": {"name": "uniform"},
    "auxiliary": {"kernel": "rope", "slices": 3, "slice_perturbation": 0.5},
    "discretization": {"scheme": "fv", "n": 64},
    "time": {"t_end": 0.2, "times": [0.0, 0.1, 0.2]},
    "particles": {"n": 24, "dt": 0.1, "initialization": "quantile"},
}
HINT = "; pass --allow-mismatch to compare anyway\n"


def config(base=BASE, **changes):
    cfg = sd.config_from_dict(base)
    return cfg.replace(**changes) if changes else cfg


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """d.nc (beta = 5) with its particles p.nc and q.nc (another seed's file name), and
    particle files of other models, written once for the module."""
    root = tmp_path_factory.mktemp("guards")
    cfg = config()
    sd.run(cfg, output=root / "d.nc", progress=False)
    run_particles(cfg, output=root / "p.nc", progress=False)
    run_particles(cfg, output=root / "q.nc", progress=False)
    run_particles(config(**{"model.beta": 30.0}), output=root / "beta30.nc", progress=False)
    return root


def one_line_error(capsys, argv):
    """Run the CLI; it must exit 2 with exactly one line on stderr. Returns that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spheredens: error: "), err
    return err


# -- the same model: compared, recorded --------------------------------------------------------
def test_same_model_is_compared_and_recorded(files, capsys):
    d, p = str(files / "d.nc"), str(files / "p.nc")
    result = compare(open_run(d), open_particles(p), density_file=d, particle_files=[p])
    assert result.attrs["model_check"].startswith(
        f"same model in {d} and every particle run (model, beta, Q, K, V"
    )
    assert "model_mismatch" not in result.attrs and "model_not_checked" not in result.attrs
    out = files / "same_compare.nc"
    assert main(["compare", d, p, "--no-figure", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "  model check: same model in" in captured.out


def test_w2_std_is_nan_for_a_single_run(files):
    density = open_run(files / "d.nc")
    one = compare(density, open_particles(files / "p.nc"))
    # one run has no spread: NaN, not 0 (ddof = 1 needs two runs)
    assert one.sizes["run"] == 1 and np.all(np.isnan(one["w2_std"].values))
    assert np.all(np.isfinite(one["w2_mean"].values))
    two = compare(
        density,
        [open_particles(files / "p.nc"), open_particles(files / "beta30.nc")],
        allow_mismatch=True,
    )
    assert np.all(np.isfinite(two["w2_std"].values))


# -- a mismatch is refused in one line naming the first difference -----------------------------
MISMATCHES = [
    ("beta", {"model.beta": 30.0}, "beta is 30 in {p} but 5 in {d}"),
    ("Q", {"model.Q": [[1.0, 0.0], [0.2, 1.0]]}, "Q differs: Q[1, 0] is 0.2 in {p} but 0 in {d}"),
    ("K", {"model.K": [[2.0, 0.0], [0.0, 1.0]]}, "K differs: K[0, 0] is 2 in {p} but 1 in {d}"),
    ("V", {"model.V": [[1.0, 0.0], [0.0, 0.7]]}, "V differs: V[1, 1] is 0.7 in {p} but 0.5 in {d}"),
    (
        "initial",
        {"initial.kappas": [3.0]},
        "the initial density differs: initial.kappas is [3] in {p} but [2] in {d}",
    ),
    ("model", {"model.name": "usa", "model.beta": 0.5}, "model is 'usa' in {p} but 'sa' in {d}"),
]


@pytest.mark.parametrize(
    "changes, words", [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES]
)
def test_mismatch_is_refused_in_one_line(files, tmp_path, capsys, changes, words):
    d, p = str(files / "d.nc"), str(tmp_path / "other.nc")
    run_particles(config(**changes), output=p, progress=False)
    expect = f"particles {p} do not belong to density {d}: " + words.format(p=p, d=d)
    with pytest.raises(ModelMismatchError) as info:
        compare(open_run(d), open_particles(p), density_file=d, particle_files=[p])
    assert str(info.value) == expect + "; pass allow_mismatch=True to compare anyway"
    assert isinstance(info.value, sd.SchemaError)
    out = tmp_path / "c.nc"
    err = one_line_error(capsys, ["compare", d, p, "--no-figure", "-o", str(out)])
    assert err == f"spheredens: error: {expect}{HINT}"
    assert not out.exists()


def test_the_first_mismatching_file_and_difference_are_named(files, tmp_path, capsys):
    """Several files: the first that differs; several differences: the first in the order
    model, beta, Q, K, V, initial density."""
    d, p = str(files / "d.nc"), str(files / "p.nc")
    other = str(tmp_path / "other.nc")
    run_particles(
        config(**{"model.beta": 7.0, "model.V": [[1.0, 0.0], [0.0, 0.9]]}),
        output=other,
        progress=False,
    )
    err = one_line_error(
        capsys, ["compare", d, p, other, "--no-figure", "-o", str(tmp_path / "c.nc")]
    )
    assert (
        err == f"spheredens: error: particles {other} do not belong to density {d}: beta is 7 in "
        f"{other} but 5 in {d}{HINT}"
    )


def test_numbers_agree_to_a_relative_tolerance(files):
    """beta differing by 1e-14 relative is the same model; 1e-9 is not (MODEL_TOLERANCE = 1e-12)."""
    density = open_run(files / "d.nc")
    p = open_particles(files / "p.nc")
    close = p.copy()
    close.attrs["beta"] = 5.0 * (1 + 1e-14)
    assert compare(density, close).attrs["model_check"].startswith("same model")
    far = p.copy()
    far.attrs["beta"] = 5.0 * (1 + 1e-9)
    # %g would print 5 twice: the message shows the digits that differ
    with pytest.raises(
        ModelMismatchError, match=r"beta is 5\.0000000050\d* in particle run 0 but 5 in the density"
    ):
        compare(density, far)


@pytest.fixture(scope="module")
def aux_density(tmp_path_factory):
    root = tmp_path_factory.mktemp("aux")
    sd.run(config(AUX), output=root / "d.nc", progress=False)
    return root / "d.nc"


AUX_MISMATCHES = [
    (
        "labels",
        {"auxiliary.xi": [0.0, 0.25, 0.5, 0.75], "auxiliary.weights": [0.25] * 4},
        "the slice labels differ: 4 slices in {p} but 3 in {d}",
    ),
    (
        "weights",
        {"auxiliary.weights": [0.5, 0.25, 0.25]},
        "the slice weights differ: weight[0] is 0.5 in {p} but 0.333333 in {d}",
    ),
    ("kernel", {"auxiliary.omega": 3.0}, "auxiliary.omega is 3 in {p} but 6.28319 in {d}"),
]


@pytest.mark.parametrize(
    "changes, words", [m[1:] for m in AUX_MISMATCHES], ids=[m[0] for m in AUX_MISMATCHES]
)
def test_usa_av_labels_and_weights_must_agree(aux_density, tmp_path, capsys, changes, words):
    d, p = str(aux_density), str(tmp_path / "other.nc")
    same = run_particles(config(AUX), progress=False)
    assert compare(open_run(d), same).attrs["model_check"].endswith("slice labels and weights)")
    run_particles(config(AUX, **changes), output=p, progress=False)
    expect = f"particles {p} do not belong to density {d}: " + words.format(p=p, d=d)
    with pytest.raises(
        ModelMismatchError, match="^" + expect.replace("[", r"\[").replace("]", r"\]")
    ):
        compare(open_run(d), open_particles(p), density_file=d, particle_files=[p])
    err = one_line_error(capsys, ["compare", d, p, "--no-figure", "-o", str(tmp_path / "c.nc")])
    assert err == f"spheredens: error: {expect}{HINT}"


def test_usa_av_labels_differing_in_value(aux_density):
    density = open_run(aux_density)
    p = run_particles(config(AUX), progress=False)
    moved = p.assign(slice_xi=("slice_index", p["slice_xi"].values + np.array([0.0, 0.0, 0.1])))
    with pytest.raises(
        ModelMismatchError,
        match=r"the slice labels differ: xi\[2\] is 0.766667 in particle run 0 "
        r"but 0.666667 in the density",
    ):
        compare(density, moved)


# -- --allow-mismatch: compared, and recorded in the file and the printed verdict ----------------
def test_allow_mismatch_is_recorded(files, tmp_path, capsys):
    d, b = str(files / "d.nc"), str(files / "beta30.nc")
    difference = f"beta is 30 in {b} but 5 in {d}"
    result = compare(
        open_run(d), open_particles(b), density_file=d, particle_files=[b], allow_mismatch=True
    )
    assert result.attrs["model_mismatch"] == f"{b}: {difference}"
    assert np.all(np.isfinite(result["w2"].values))
    out = tmp_path / "c.nc"
    assert (
        main(
            [
                "compare",
                d,
                b,
                str(files / "p.nc"),
                "--no-figure",
                "-o",
                str(out),
                "--allow-mismatch",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert (
        f"  model check: models differ, compared anyway (--allow-mismatch): {difference}" in printed
    )
    written = xr.open_dataset(out)
    assert written.attrs["model_mismatch"] == f"{b}: {difference}"
    assert written.attrs["model_check"] == (
        f"models differ, compared anyway (allow_mismatch): {difference}. "
        f"same model in {d} and {files / 'p.nc'} (model, beta, Q, K, V, "
        "domain, initial density)"
    )
    written.close()


def test_another_domain_is_refused_even_with_allow_mismatch(files, tmp_path, capsys):
    g = np.random.default_rng(0).standard_normal((3, 10, 3))
    np.save(tmp_path / "s.npy", g / np.linalg.norm(g, axis=-1, keepdims=True))
    s = str(tmp_path / "s.nc")
    assert (
        main(["convert-particles", str(tmp_path / "s.npy"), s, "--domain", "sphere", "--dt", "0.1"])
        == 0
    )
    d = str(files / "d.nc")
    err = one_line_error(
        capsys, ["compare", d, s, "--no-figure", "--allow-mismatch", "-o", str(tmp_path / "c.nc")]
    )
    assert err == (
        f"spheredens: error: particles {s} do not belong to density {d}: domain is 'sphere' in {s} "
        f"but 'circle' in {d}; W2 needs both on one domain\n"
    )


# -- swapped and wrong-kind files are named ----------------------------------------------------
def test_swapped_arguments_are_named(files, tmp_path, capsys):
    d, p, q = (str(files / n) for n in ("d.nc", "p.nc", "q.nc"))
    out = ["--no-figure", "-o", str(tmp_path / "c.nc")]
    assert one_line_error(capsys, ["compare", p, d, *out]) == (
        f"spheredens: error: the arguments are swapped: the first argument, {p}, is a particle "
        "file "
        f"(spheredens-particles-1) and {d} is a density file; compare takes the density file "
        "first: "
        f"spheredens compare {d} {p}\n"
    )
    assert one_line_error(capsys, ["compare", p, q, d, *out]).endswith(
        f"spheredens compare {d} {p} {q}\n"
    )
    # particle files only are measured against the first (tests/test_compare_pairs.py); a
    # density then a mix against the density, each run once
    assert one_line_error(capsys, ["compare", d, p, d, *out]) == (
        f"spheredens: error: {d} is given twice (it would be measured against itself); give "
        "each run once: spheredens compare RUN RUN... [--reference RUN]\n"
    )
    with pytest.raises(
        sd.SchemaError,
        match=r"^the arguments are swapped: the density argument is a particle "
        r"file .* compare\(density, particles\)$",
    ):
        compare(open_particles(p), open_run(d))


@pytest.fixture(scope="module")
def other_kinds(files, tmp_path_factory):
    """A comparison file, a sweep's combined file, an analysis file and a text file named .nc."""
    from spheredens.analysis import analyze_beta
    from spheredens.sweep import combine, sweep_from_dict

    root = tmp_path_factory.mktemp("kinds")
    assert (
        main(
            [
                "compare",
                str(files / "d.nc"),
                str(files / "p.nc"),
                "--no-figure",
                "-o",
                str(root / "compare.nc"),
            ]
        )
        == 0
    )
    base = {k: v for k, v in BASE.items() if k != "particles"}
    sweep = sweep_from_dict(
        {"base": base, "output_dir": "cases", "vary": {"model.beta": [4.0, 5.0]}}, base_dir=root
    )
    (root / "cases").mkdir()
    for case in sweep.cases:
        sd.run(case.config, output=case.path, progress=False)
    combined = combine(sweep)
    write_dataset(combined, root / "combined.nc")
    write_dataset(analyze_beta(combined), root / "analysis.nc")
    (root / "text.nc").write_text("not a netCDF file\n")
    return root


KINDS = [
    ("compare.nc", "a comparison file (spheredens-compare-1)"),
    ("combined.nc", "a sweep's combined file (spheredens-sweep-1)"),
    ("analysis.nc", "an analysis file of analyze-beta"),
    ("text.nc", "not a netCDF file"),
]


@pytest.mark.parametrize("name, kind", KINDS, ids=[k[0] for k in KINDS])
def test_wrong_kind_files_are_named(files, other_kinds, tmp_path, capsys, name, kind):
    wrong, d, p = str(other_kinds / name), str(files / "d.nc"), str(files / "p.nc")
    out = ["--no-figure", "-o", str(tmp_path / "c.nc")]
    first = one_line_error(capsys, ["compare", wrong, p, *out])
    assert first.startswith(f"spheredens: error: the first argument, {wrong}, is {kind}")
    assert first.endswith(
        "compare takes the density file first: spheredens compare DENSITY PARTICLES...\n"
    )
    among = one_line_error(capsys, ["compare", d, wrong, *out])
    assert among.startswith(f"spheredens: error: {wrong} (particle argument 1) is {kind}")
    # not a list of missing variables: short once the paths (of any length: the temporary
    # folder's is the machine's) are taken out
    assert len(first.replace(wrong, "")) < 260 and len(among.replace(wrong, "")) < 260
    assert not (tmp_path / "c.nc").exists()


# -- converted files: no model, compared with a notice; --config stamps it ----------------------
@pytest.fixture(scope="module")
def converted(files):
    """The particles of p.nc as another code would hand them over: angles and times in an .npz."""
    p = open_particles(files / "p.nc")
    x = p["position"].values
    np.savez(files / "theirs.npz", theta=np.arctan2(x[..., 1], x[..., 0]), t=p["time"].values)
    return files / "theirs.npz"


def test_converted_file_without_model_is_compared_with_a_notice(files, converted, tmp_path, capsys):
    c = str(tmp_path / "c.nc")
    assert main(["convert-particles", str(converted), c, "--domain", "circle"]) == 0
    capsys.readouterr()
    notice = (
        f"{c} carries no model (converted from another code): the model was not checked; stamp it "
        "with spheredens convert-particles ... --config CONFIG"
    )
    with pytest.warns(sd.SpheredensWarning) as caught:
        result = compare(open_run(files / "d.nc"), open_particles(c), particle_files=[c])
    assert [str(w.message) for w in caught] == [notice]
    assert result.attrs["model_not_checked"] == f"{c}: model, beta, Q, K, V, initial density"
    assert result.attrs["model_check"] == notice
    out = tmp_path / "cmp.nc"
    c2 = str(tmp_path / "c2.nc")
    convert_particles(converted, domain="circle").to_netcdf(c2)
    assert main(["compare", str(files / "d.nc"), c, c2, "--no-figure", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    # once (two files, one notice), one line, no Python source location
    assert captured.err == (
        f"spheredens: warning: {c}, {c2} carry no model (converted from another code): the "
        "model was not checked; stamp them with spheredens convert-particles ... --config "
        "CONFIG\n"
    )
    assert "model_not_checked" in xr.open_dataset(out).attrs


def test_converted_file_with_model_and_beta_only_is_checked_as_far_as_it_goes(
    files, converted, tmp_path, capsys
):
    """--model and --beta record those two: a wrong beta is refused, and with the right one the
    notice names what was not checked."""
    d = str(files / "d.nc")
    wrong, right = str(tmp_path / "wrong.nc"), str(tmp_path / "right.nc")
    base = ["convert-particles", str(converted), "--domain", "circle", "--model", "sa"]
    assert main([base[0], base[1], wrong, *base[2:], "--beta", "30"]) == 0
    assert main([base[0], base[1], right, *base[2:], "--beta", "5"]) == 0
    capsys.readouterr()
    assert one_line_error(
        capsys, ["compare", d, wrong, "--no-figure", "-o", str(tmp_path / "c.nc")]
    ) == (
        f"spheredens: error: particles {wrong} do not belong to density {d}: beta is 30 in {wrong} "
        "but 5 in "
        f"{d}{HINT}"
    )
    assert main(["compare", d, right, "--no-figure", "-o", str(tmp_path / "c.nc")]) == 0
    assert capsys.readouterr().err == (
        f"spheredens: warning: {right} does not record Q, K, V, initial density: "
        "those were not checked; stamp it with spheredens convert-particles ... "
        "--config CONFIG\n"
    )


def test_convert_with_config_stamps_the_model(files, converted, tmp_path, capsys):
    toml = tmp_path / "run.toml"
    toml.write_text(config().to_toml())
    stamped = str(tmp_path / "stamped.nc")
    assert main(["convert-particles", str(converted), stamped, "--config", str(toml)]) == 0
    capsys.readouterr()
    ds = open_particles(stamped)
    assert ds.attrs["model"] == "sa" and ds.attrs["beta"] == 5.0 and ds.attrs["domain"] == "circle"
    np.testing.assert_array_equal(ds["V"].values, [[1.0, 0.0], [0.0, 0.5]])
    assert ds.attrs["model_source"] == f"stamped from {toml} by convert-particles"
    d = str(files / "d.nc")
    assert main(["compare", d, stamped, "--no-figure", "-o", str(tmp_path / "c.nc")]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "model check: same model" in captured.out
    # stamped with another beta: now the check applies and refuses
    toml30 = tmp_path / "run30.toml"
    toml30.write_text(config(**{"model.beta": 30.0}).to_toml())
    wrong = str(tmp_path / "wrong.nc")
    assert main(["convert-particles", str(converted), wrong, "--config", str(toml30)]) == 0
    capsys.readouterr()
    assert one_line_error(
        capsys, ["compare", d, wrong, "--no-figure", "-o", str(tmp_path / "c2.nc")]
    ) == (
        f"spheredens: error: particles {wrong} do not belong to density {d}: beta is 30 in {wrong} "
        "but 5 in "
        f"{d}{HINT}"
    )


def test_convert_config_usa_av_stamps_the_slices(aux_density, tmp_path):
    p = run_particles(config(AUX), progress=False)
    np.save(tmp_path / "x.npy", p["position"].values)
    ds = convert_particles(tmp_path / "x.npy", times=p["time"].values, config=config(AUX))
    np.testing.assert_array_equal(ds["slice_xi"].values, p["slice_xi"].values)
    np.testing.assert_array_equal(ds["slice_weight"].values, p["slice_weight"].values)
    assert compare(open_run(aux_density), ds).attrs["model_check"].startswith("same model")


def test_convert_config_must_agree_with_the_options(converted, tmp_path, capsys):
    toml = tmp_path / "run.toml"
    toml.write_text(config().to_toml())
    base = ["convert-particles", str(converted), str(tmp_path / "x.nc"), "--config", str(toml)]
    assert "domain: 'sphere' disagrees with the configuration" in one_line_error(
        capsys, [*base, "--domain", "sphere"]
    )
    assert "beta: 7 disagrees with the configuration" in one_line_error(
        capsys, [*base, "--beta", "7"]
    )
    assert one_line_error(
        capsys, ["convert-particles", str(converted), str(tmp_path / "x.nc")]
    ) == (
        "spheredens: error: --domain: give the domain (--domain circle or --domain sphere) or the "
        "run "
        "configuration of the particles (--config CONFIG)\n"
    )
    assert not (tmp_path / "x.nc").exists()
