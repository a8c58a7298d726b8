"""Progress that users can see: tqdm bars for run, particles and compare, off with
--quiet and when stderr is not a terminal, forced with --progress, on in a notebook; a sweep
that reports as it goes through Dask's events (dashboard address, each case's model time
against t_end before any case has finished, wall times, the time left)."""

from __future__ import annotations

import http.server
import io
import re
import sys
import threading
import types

import pytest
from conftest import make_config

import spheredens as sd
from spheredens.cli import main
from spheredens.simulate import Progress, progress_listener, progress_wanted
from spheredens.sweep import SweepReporter, load_sweep, run_sweep
from spheredens.sweep._report import _dashboard_missing

BASE = """
[model]
name = "sa"
beta = 5.0
K = [[1.75, 0.866025], [0.433013, 2.5]]
V = [[1.0, 0.0], [0.0, 0.5]]
[discretization]
n = 96
[time]
t_end = {t_end}
snapshots = 5
"""
SWEEP = """
base = "base.toml"
output_dir = "cases"
[vary]
"model.beta" = {betas}
"""
#: a progress line of a case: "  beta-5.0: t = 12.3 / 30 (41%), 1.5 s ..."
PROGRESS_LINE = re.compile(r"^  (\S+): t = [0-9.e+-]+ / 30 \(\d+%\), ")
#: the line of a finished case: "  [1/4] beta-5.0: ran in 3.2 s ..."
FINISHED_LINE = re.compile(r"^  \[(\d)/4\] (\S+): ran in [0-9.]+ s")


def write_sweep(folder, betas, t_end):
    (folder / "base.toml").write_text(BASE.format(t_end=t_end))
    (folder / "sweep.toml").write_text(SWEEP.format(betas=betas))
    return folder / "sweep.toml"


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_a_sweep_reports_before_its_first_case_finishes(tmp_path):
    """Four cases on a two-worker local cluster; the captured stream shows the
    dashboard address first, then progress lines of running cases (model time against t_end)
    before the first case ends, a wall time per case, an estimate of the time left and an
    end line. Each case integrates to t = 30 (about 750 steps, 1 to 4 s after a set-up of a
    few seconds on a fresh worker), its worker publishing every 0.3 s of wall time."""
    sweep = load_sweep(write_sweep(tmp_path, "[5.0, 6.0, 7.0, 8.0]", 30.0))
    stream = io.StringIO()
    combined, outcome = run_sweep(sweep, n_workers=2, stream=stream, progress_interval=0.3)
    assert set(outcome.values()) == {"ran"} and combined is not None
    lines = stream.getvalue().splitlines()
    assert re.match(r"sweep: Dask dashboard at https?://\S+:\d+/status$", lines[0]), lines[:3]
    assert lines[1] == "sweep: 4 case(s) to run on 2 worker thread(s)"
    finished = [i for i, line in enumerate(lines) if FINISHED_LINE.match(line)]
    assert len(finished) == 4, lines  # every case's outcome with its wall time, once
    assert {FINISHED_LINE.match(lines[i]).group(2) for i in finished} == {
        c.name for c in sweep.cases
    }
    early = {
        PROGRESS_LINE.match(line).group(1)
        for line in lines[: finished[0]]
        if PROGRESS_LINE.match(line)
    }
    assert early, (
        f"no case reported its progress before the first one finished:\n{stream.getvalue()}"
    )
    assert early <= {c.name for c in sweep.cases}
    assert any(
        line.startswith(f"  {name}: started on ") for name in early for line in lines[: finished[0]]
    )
    assert any("; sweep ~" in line and line.endswith(" left") for line in lines), (
        lines
    )  # the time left
    assert re.match(r"sweep: 4 of 4 case\(s\) ended in [0-9.]+ s$", lines[-1]), lines[-1]


def test_quiet_sweep_prints_no_progress(tmp_path, capsys):
    path = write_sweep(tmp_path, "[5.0, 6.0]", 5.0)
    assert main(["sweep", str(path), "--quiet", "--workers", "2"]) == 0
    out, err = capsys.readouterr()
    assert "2 ran, 0 done earlier, 0 failed" in out
    for text in ("dashboard", " t = ", "[1/2]", "started", "ended in"):
        assert text not in out and text not in err, (out, err)


def test_reporter_lines_and_estimate():
    """The reporter alone, fed the events workers publish: a start line, a progress line with
    the case's time left once two events give a rate, the sweep's time left from the running
    case and the queued one, late events of a finished case dropped."""
    stream = io.StringIO()
    rep = SweepReporter(2, stream=stream)
    rep.slots = 1
    base = {"case": "a", "worker": "tcp://w:1", "t_start": 0.0, "t_end": 10.0, "steps": 0}
    rep.event((0.0, {**base, "event": "start", "t": 0.0, "wall": 0.0}))
    rep.event((0.0, {**base, "event": "step", "t": 2.0, "wall": 3.0}))  # set-up: no estimate yet
    rep.event((0.0, {**base, "event": "step", "t": 4.0, "wall": 4.0}))  # 2 model time per s
    lines = stream.getvalue().splitlines()
    assert lines[0] == "  a: started on tcp://w:1 (t_end = 10)"
    assert lines[1] == "  a: t = 2 / 10 (20%), 3.0 s"
    assert lines[2].startswith("  a: t = 4 / 10 (40%), 4.0 s, ~3.0 s left; sweep ~")
    # case a needs 3 s more (7 s in all); the queued case b as long, one worker thread: ~10 s
    assert rep.time_left() == pytest.approx(10.0, abs=0.5)  # 0.5: the seconds this test takes
    rep.finished(1, "a", "ran", 7.0)
    rep.event((0.0, {**base, "event": "step", "t": 9.0, "wall": 6.5}))  # late: dropped
    assert stream.getvalue().splitlines()[3:] == ["  [1/2] a: ran in 7.0 s; sweep ~7.0 s left"]


def test_dashboard_that_does_not_answer_is_said():
    """A scheduler started with --no-dashboard still reports its HTTP server as the dashboard;
    the page is asked for, and a 404 or no answer is said instead of a dead link."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    class Status(NotFound):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"dashboard")

    assert "needs bokeh" in _dashboard_missing(None)
    for handler, expected in ((NotFound, "answers HTTP 404"), (Status, None)):
        server = http.server.HTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            why = _dashboard_missing(f"http://127.0.0.1:{server.server_port}/status")
        finally:
            server.shutdown()
            server.server_close()
        assert (why is None) if expected is None else (expected in why), why
    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)  # a port nobody listens on
    port = server.server_port
    server.server_close()
    assert "does not answer from here" in _dashboard_missing(f"http://127.0.0.1:{port}/status")


def test_progress_listener_reports_start_steps_and_finish():
    """Every Progress made inside progress_listener reports, even without a bar (as in a
    sweep's case): a start, step events at most every interval, a finish with the reason."""
    events = []
    cfg = make_config(
        discretization={"scheme": "fv", "n": 128}, time={"t_end": 5.0, "snapshots": 2}
    )
    with progress_listener(events.append, interval=1e-9):
        sd.run(cfg, progress=False)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "finish" and kinds.count("step") >= 2
    assert events[-1]["stop_reason"] == "end" and events[-1]["t"] == 5.0
    steps = [e["t"] for e in events if e["event"] == "step"]
    assert steps == sorted(steps) and all(0 < t <= 5.0 for t in steps)
    events.clear()
    sd.run(cfg, progress=False)  # outside the block: nobody listens
    assert events == []


@pytest.fixture
def no_delay(monkeypatch):
    """Bars appear at once (their default delay of 2 s hides the bars of these short runs)."""
    monkeypatch.setattr(Progress, "DELAY", 0.0)


def test_run_progress_is_off_unless_a_terminal_or_forced(no_delay, capsys):
    cfg = make_config(
        discretization={"scheme": "fv", "n": 128}, time={"t_end": 5.0, "snapshots": 2}
    )
    sd.run(cfg)  # stderr is not a terminal here: no bar
    assert capsys.readouterr().err == ""
    sd.run(cfg, progress=True)  # forced
    err = capsys.readouterr().err
    assert "t = 5 / 5 |" in err and "100.0%" in err and err.endswith("\n")
    stream = io.StringIO()  # an explicit stream that is not a terminal: no bar
    sd.simulate(
        sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization),
        cfg.time,
        observers=[Progress(stream)],
    )
    assert stream.getvalue() == ""
    tty = FakeTTY()
    sd.simulate(
        sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization),
        cfg.time,
        observers=[Progress(tty, desc="example")],
    )
    assert "example: t = 5 / 5 |" in tty.getvalue()


def test_run_and_particles_commands_progress_flags(no_delay, tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text(
        BASE.format(t_end=2.0).replace("n = 96", "n = 128")
        + '[particles]\nn = 40\ninitialization = "iid"\ndt = 0.05\n'
    )
    for flags, shown in (([], False), (["--progress"], True), (["--progress", "--quiet"], False)):
        assert main(["run", str(config), "--no-figure", "--overwrite", *flags]) == 0
        assert ("t = 2 / 2 |" in capsys.readouterr().err) == shown, flags
        assert main(["particles", str(config), "--overwrite", *flags]) == 0
        assert ("t = 2 / 2 |" in capsys.readouterr().err) == shown, flags
    for flags, shown in (([], False), (["--progress"], True), (["--quiet"], False)):
        assert (
            main(
                [
                    "compare",
                    str(tmp_path / "c.nc"),
                    str(tmp_path / "c_particles.nc"),
                    "--no-figure",
                    "--overwrite",
                    *flags,
                ]
            )
            == 0
        )
        assert ("compare: 5/5 (snapshot, file) |" in capsys.readouterr().err) == shown, flags


def test_notebook_shows_progress(monkeypatch):
    """In a Jupyter kernel (IPython's ZMQ shell) the bar is on although stderr is no terminal;
    an explicit stream that is not a terminal still gets none, and False still means off."""
    assert not progress_wanted(None)
    shell = type("ZMQInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))
    assert progress_wanted(None) and Progress().enabled
    assert not progress_wanted(None, io.StringIO()) and not progress_wanted(False)
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: None))
    assert not progress_wanted(None)  # plain python with IPython imported: no notebook
