"""The time loop: an integrator driven by a scheme, landing exactly on snapshot times."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import signal
import sys
import threading
import time as _time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ._lazy import tqdm_auto
from ._types import Array
from .config import MAX_STEPS, MAX_STEPS_TEXT, TimeConfig

logger = logging.getLogger(__name__)

_stop_request: dict[str, str | None] = {"reason": None}


def request_stop(reason: str = "interrupted") -> None:
    """Ask the running simulation to stop after its current step (signal handlers call this).

    The loop then finishes the step, tells its observers (the file is written with a
    checkpoint) and returns with ``stop_reason = reason``.
    """
    _stop_request["reason"] = reason


@contextlib.contextmanager
def signal_handler(handler: Any, signals: tuple[int, ...] = (signal.SIGINT,)) -> Iterator[None]:
    """Install ``handler`` (a function or ``signal.SIG_IGN``) for ``signals`` while the block
    runs, then restore the previous handlers. Only the main thread can set handlers: elsewhere
    nothing changes."""
    old: dict = {}
    if threading.current_thread() is threading.main_thread():
        for sig in signals:
            old[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


class Observer:
    """Something told about a run: at its start, after every step, at every snapshot time, and
    at its end. Subclass it and override what you need (every method does nothing here)."""

    def start(self, info: dict[str, Any]) -> None:
        """``info``: ``t_start``, ``t_end``, ``initial_state``, ``scheme``, ``steps_done`` and
        ``stepper`` (its ``retried_steps`` grows as the run goes)."""

    def step(self, t: float, dt: float, state: Array) -> None:
        """After every accepted step, with the new time and state."""

    def observe(self, t: float, state: Array) -> None:
        """At every snapshot time."""

    def finish(self, result: "SimulationResult") -> None:
        """At the end, also after a failure or an interruption."""

    def stop_requested(self) -> str:
        """Asked after every snapshot: a non-empty message ends the run there, complete
        (``stop_reason = "done"``), e.g. a particle run some time after its departure."""
        return ""


@dataclass
class SimulationResult:
    """How a simulation ended.

    Attributes
    ----------
    stop_reason : str
        ``"end"`` (reached t_end), ``"done"`` (an observer ended it, complete:
        :meth:`Observer.stop_requested`), ``"nan"`` (non-finite values), ``"unstable"`` (a step
        broke an invariant the scheme promises: :class:`Invariants`), ``"dt_collapse"`` (the CFL
        step fell below 1e-9 t_end), ``"speed_bound"``, ``"interrupted"`` (KeyboardInterrupt or
        SIGINT), ``"terminated"`` (SIGTERM) or ``"error"`` (an exception ended the run; observers
        are told, then it propagates).
    message : str
        Human-readable explanation.
    t : float
        Time of ``state``, the last good state.
    state : ndarray
    n_steps : int
    wall_time : float
        Seconds.
    retried_steps : int
        Steps the scheme refused (``step_ok``) and that were retried with dt / 2.
    """

    stop_reason: str
    message: str
    t: float
    state: Array
    n_steps: int
    wall_time: float
    retried_steps: int = 0

    @property
    def completed(self) -> bool:
        return self.stop_reason in ("end", "done")


#: how many times a step refused by ``scheme.step_ok`` is halved before it is taken anyway
MAX_STEP_RETRIES = 8
#: |mass - 1| allowed for every slice after a step: every scheme conserves the mass to
#: round-off (a sum of ~n eps per step: below 1e-10 after 1e6 steps of n = 1e4)
MASS_TOLERANCE = 1e-6
#: the growth check's factor c on the compression: max |rho| may grow by
#: exp(c int max(-div X) dt) (times the scheme's ``growth_slack``), twice what the
#: characteristics allow
GROWTH_FACTOR = 2.0


class _Stop(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


class Invariants:
    """What a scheme promises, checked after every accepted step; a violation is
    ``_Stop("unstable")`` with one line naming the quantity and a safe setting.

    * **Mass**: every slice keeps mass 1 to :data:`MASS_TOLERANCE` (all schemes conserve it).
    * **Positivity**, where the scheme promises it (:meth:`Scheme.promises_positivity`: a
      ``positive`` scheme, an SSP integrator, a small enough cfl): min rho >= 0.
    * **Growth**: along a characteristic d rho / dt = -rho div X, so the exact max |rho| grows
      by at most exp(int D dt), D = max(0, max of -div X) the largest compression. The check
      allows, from every earlier time s of the run, max|rho|(t) <= S max|rho|(s)
      exp(c int_s^t D dt) with D as the scheme measured it at the start of each step
      (``Tendency.max_compression``), c = :data:`GROWTH_FACTOR` and S the scheme's
      ``growth_slack`` (the discrete maximum moving between points or cells). The slack is
      given once, not per step: an unstable mode that grows faster than the compression
      allows is caught after a growth by S. Recursively, the envelope E(t + dt) = min(E(t),
      S max|rho|(t)) exp(c dt D).

    Only for schemes with a grid density (``scheme.grid``); particle systems and bare test
    schemes are not checked (:meth:`for_scheme` gives None).
    """

    def __init__(self, scheme: Any, cfl: float) -> None:
        self.scheme, self.cfl = scheme, cfl
        self.positivity = bool(scheme.promises_positivity(cfl))
        self.slack = float(scheme.growth_slack)
        self.envelope = math.inf
        self._top = math.nan  # max |rho| of the last state checked

    @classmethod
    def for_scheme(cls, scheme: Any, cfl: float) -> "Invariants | None":
        return cls(scheme, cfl) if hasattr(scheme, "grid") and hasattr(scheme, "extremes") else None

    def start(self, y: Array) -> None:
        self._top = self.scheme.extremes(y)[0]
        self.envelope = self.slack * self._top

    def check(self, y: Array, dt: float, compression: float, step: int, t: float) -> None:
        """Check the state ``y`` after step number ``step`` (of size ``dt``, from time ``t``),
        whose first stage measured the compression max(0, -div X) = ``compression``."""
        scheme = self.scheme
        where = f"step {step} (t = {t:.6g} to {t + dt:.6g})"
        masses = np.asarray(scheme.masses(y), dtype=float)
        off = np.abs(masses - 1.0)
        if not np.all(off <= MASS_TOLERANCE):
            k = int(np.argmax(off))
            slice_ = f" of slice {k}" if masses.size > 1 else ""
            self.fail(
                f"{where} changed the mass{slice_} to {masses[k]:.12g}, not 1 "
                f"(to {MASS_TOLERANCE:g}), though the scheme conserves it"
            )
        top, low = scheme.extremes(y)
        if self.positivity and low < 0.0:
            self.fail(
                f"{where} made rho negative (min rho = {low:.3g}), though scheme "
                f"{scheme.name!r} keeps rho >= 0 with integrator {scheme.integrator.name!r} at "
                f"time.cfl = {self.cfl:g}"
            )
        previous = self._top
        if np.isfinite(compression):
            limit = min(self.envelope, self.slack * previous) * math.exp(
                GROWTH_FACTOR * dt * compression
            )
            if top > limit * (1.0 + 1e-12):
                self.fail(
                    f"{where} took max |rho| from {previous:.4g} to {top:.4g}, more than the "
                    f"velocity's compression allows (max(-div X) = {compression:.3g}: at most "
                    f"{limit:.4g} with the safety factors)"
                )
            self.envelope = limit
        else:  # not measured: nothing to compare with, start again from here
            self.envelope = self.slack * top
        self._top = top

    def fail(self, what: str) -> None:
        """Stop the run: ``what`` went wrong, and what to run instead."""
        safe = getattr(self.scheme, "safe_setting", None)
        hint = safe(self.cfl) if callable(safe) else f"use time.cfl <= {min(0.4, 0.5 * self.cfl):g}"
        raise _Stop("unstable", f"unstable integration: {what}; {hint}")


class Stepper:
    """One step of a scheme (:class:`~spheredens.schemes.Scheme`) from (t, y) towards a stop.

    The step size is dt = ``scheme.stable_dt(cfl, tendency)`` with the speeds of the state at
    the start of the step (the speed at least ``scheme.speed_floor``; a zero speed means a
    steady state), at most ``time.max_dt``, shortened so that the stop is hit exactly (a step
    that would leave less than one more full step is split in two equal halves, to avoid
    slivers). A step the scheme refuses (``step_ok``) is retried with dt / 2, at most
    :data:`MAX_STEP_RETRIES` times. Raises ``_Stop`` on non-finite values, a speed above
    ``scheme.speed_bound``, a step below 1e-9 t_end, or a step that breaks what the scheme
    promises (:class:`Invariants`: ``unstable``).
    """

    def __init__(self, scheme: Any, time: TimeConfig) -> None:
        self.scheme = scheme
        self.cfl, self.max_dt = time.cfl, time.max_dt
        self.t_end = time.t_end
        # a step below t_end / 1e9 would take more than a billion steps
        self.dt_floor = time.t_end / MAX_STEPS
        self.retried_steps = 0
        self.invariants = Invariants.for_scheme(scheme, time.cfl)
        #: number of the next step (the loop sets it), the first CFL step of this run and the
        #: compression max(0, -div X) of the last step's first stage
        self.step_number = 1
        self._first_dt: float | None = None
        self._compression = math.nan

    def start(self, y: Array) -> None:
        """Before the first step from ``y``."""
        if self.invariants is not None:
            self.invariants.start(y)

    def step_size(self, y: Array, t: float, target: float) -> tuple[float, Any]:
        """(dt, rate at (t, y)) for the next step towards ``target``."""
        scheme = self.scheme
        tendency = scheme.rhs(y, t)
        speed = max(tendency.max_speed, scheme.speed_floor)
        if not (np.isfinite(speed) and np.all(np.isfinite(tendency.rate))):
            raise _Stop(
                "nan",
                "d rho/dt is not finite: the resolution is too coarse for this beta, "
                "or the state is corrupted",
            )
        if speed > scheme.speed_bound * (1.0 + 1e-9):
            raise _Stop(
                "speed_bound",
                f"the speed {speed:.6g} exceeds ||V|| = {scheme.speed_bound:.6g}, "
                "impossible for softmax attention: the state is corrupted",
            )
        dt = (
            scheme.stable_dt(self.cfl, tendency._replace(max_speed=speed))
            if speed > 0.0
            else target - t
        )
        if self.max_dt is not None:
            dt = min(dt, self.max_dt)
        first = self._first_dt
        if first is None:
            self._first_dt = first = dt
        if dt < self.dt_floor:
            # a speed the model's V gives (||V||), and a step that has not shrunk: the horizon
            # asks for too many steps, nothing blew up
            natural = speed <= max(
                10.0 * scheme.speed_floor,
                scheme.speed_bound if math.isfinite(scheme.speed_bound) else 0.0,
            )
            if natural and dt >= 0.5 * first:
                raise _Stop(
                    "dt_collapse",
                    f"the step {dt:.3g} (max speed {speed:.3g}) is below t_end / "
                    f"{MAX_STEPS_TEXT} = {self.dt_floor:.3g}: time.t_end = {self.t_end:g} would "
                    f"take more than {MAX_STEPS_TEXT} steps; use a smaller time.t_end",
                )
            raise _Stop(
                "dt_collapse",
                f"the CFL step {dt:.3g} fell below t_end / {MAX_STEPS_TEXT} = "
                f"{self.dt_floor:.3g} (max speed {speed:.3g}; the first step was {first:.3g}): the "
                "velocity blew up; use a finer grid or a smaller beta",
            )
        self._compression = float(getattr(tendency, "max_compression", math.nan))
        return dt, tendency.rate

    def advance(self, y: Array, t: float, target: float) -> tuple[Array, float, float]:
        """One accepted step: (new state, new time, dt taken)."""
        scheme = self.scheme
        dt, k1 = self.step_size(y, t, target)
        for attempt in range(MAX_STEP_RETRIES + 1):
            # a step within 1e-9 relative of the stop lands on it (no round-off slivers)
            land = t + dt * (1.0 + 1e-9) >= target
            if land:
                dt = target - t
            elif t + 2.0 * dt * (1.0 + 1e-9) > target:
                dt = 0.5 * (target - t)
            y_new = scheme.post_step(scheme.integrator.step(scheme.rate, y, t, dt, k1), dt)
            if attempt == MAX_STEP_RETRIES or scheme.step_ok(y, y_new):
                break
            dt *= 0.5
            self.retried_steps += 1
        if not np.all(np.isfinite(y_new)):
            raise _Stop(
                "nan",
                f"rho became non-finite in a step of dt = {dt:.3g}: the resolution "
                "is too coarse for this beta, or the step too large",
            )
        if self.invariants is not None:
            self.invariants.check(y_new, dt, self._compression, self.step_number, t)
        return y_new, (target if land else t + dt), dt


def simulate(
    scheme: Any,
    time: TimeConfig,
    observers: Sequence[Observer] = (),
    *,
    state: Array | None = None,
    t_start: float = 0.0,
    steps_done: int = 0,
    observe_start: bool | None = None,
) -> SimulationResult:
    """Integrate ``scheme`` from ``t_start`` to ``time.t_end``, landing exactly on every
    snapshot time of ``time`` (the controller around a :class:`Stepper`).

    Parameters
    ----------
    scheme : :class:`~spheredens.schemes.Scheme`
    time : TimeConfig
    observers : sequence of :class:`Observer`
        Told at the start, after every step, at every snapshot time and at the end.
    state, t_start, steps_done : optional
        A checkpoint to continue from (default: ``scheme.initial_state()`` at t = 0). Steps
        depend only on (t, state), so continuing from a checkpoint taken at a step boundary
        reproduces the uninterrupted run bit for bit.
    observe_start : bool, optional
        Whether observers see ``state`` at ``t_start`` when it is a snapshot time (default: only
        for a fresh start, ``steps_done == 0``; a resumed run passes False when the file already
        holds that snapshot).

    Notes
    -----
    Stops early, keeping the last good state, when values become non-finite (``nan``), a step
    breaks what the scheme promises (``unstable``: :class:`Invariants`), the CFL step collapses
    (``dt_collapse``), a softmax speed exceeds ||V|| (``speed_bound``: a corrupted state), or
    :func:`request_stop` / KeyboardInterrupt asks for it. Any other exception (a MemoryError,
    a bug) ends the run with ``stop_reason = "error"``: the observers are told (the file is
    written with its snapshots and the last good state), then it propagates.
    """
    _stop_request["reason"] = None
    y = scheme.initial_state() if state is None else np.array(state)
    t = float(t_start)
    t_end = time.t_end
    snapshots = [s for s in time.snapshot_times() if s >= t]
    stops = [s for s in sorted(set(snapshots) | {t_end}) if s > t]
    snapshot_set = set(snapshots)
    stepper = Stepper(scheme, time)
    clock = _time.perf_counter()
    info = {
        "t_start": t,
        "t_end": t_end,
        "initial_state": y.copy(),
        "scheme": scheme,
        "steps_done": steps_done,
        "stepper": stepper,
    }
    for obs in observers:
        obs.start(info)
    if observe_start is None:
        observe_start = steps_done == 0
    if t in snapshot_set and observe_start:
        for obs in observers:
            obs.observe(t, y)
    steps = steps_done
    reason, message = "end", f"reached t_end = {t_end:g}"
    try:
        stepper.start(y)
        for target in stops:
            while t < target:
                stepper.step_number = steps + 1
                y, t, dt = stepper.advance(y, t, target)
                steps += 1
                for obs in observers:
                    obs.step(t, dt, y)
                if _stop_request["reason"] is not None:
                    reason = str(_stop_request["reason"])
                    raise _Stop(reason, f"{reason} at t = {t:g} (step {steps})")
            if target in snapshot_set:
                for obs in observers:
                    obs.observe(target, y)
                done = [
                    m for m in (getattr(obs, "stop_requested", str)() for obs in observers) if m
                ]
                if done:
                    raise _Stop("done", done[0])
    except _Stop as stop:
        reason, message = stop.reason, stop.message
        if reason not in ("interrupted", "terminated", "done"):
            # info, not warning: the result carries the message and run() raises it as a
            # SimulationError, which the command line prints (once)
            logger.info("simulation stopped at t = %g: %s", t, message)
    except KeyboardInterrupt:
        reason, message = "interrupted", f"interrupted at t = {t:g}"
    except BaseException as exc:
        # the file says how the run ended, with everything before it kept; then the exception
        # goes on to the caller (the command line prints it)
        _stop_request["reason"] = None
        text = " ".join(str(exc).split()) or type(exc).__name__
        result = SimulationResult(
            "error",
            f"{type(exc).__name__} at t = {t:g} (step {steps + 1}): {text}"[:500],
            t,
            y,
            steps,
            _time.perf_counter() - clock,
            stepper.retried_steps,
        )
        for obs in observers:
            try:
                obs.finish(result)
            except Exception as again:  # noqa: BLE001 - the first exception is the one to report
                logger.warning(
                    "could not record the end of the run (%s: %s)", type(again).__name__, again
                )
        raise
    _stop_request["reason"] = None
    result = SimulationResult(
        reason, message, t, y, steps, _time.perf_counter() - clock, stepper.retried_steps
    )
    for obs in observers:
        obs.finish(result)
    return result


#: the listener of the :class:`Progress` observers made in this context (:func:`progress_listener`)
_listener: contextvars.ContextVar[tuple[Callable[[dict[str, Any]], None], float] | None] = (
    contextvars.ContextVar("spheredens_progress_listener", default=None)
)


@contextlib.contextmanager
def progress_listener(
    listener: Callable[[dict[str, Any]], None], *, interval: float = 5.0
) -> Iterator[None]:
    """While the block runs, every :class:`Progress` observer made in it (so every run of
    :func:`spheredens.run` and :func:`~spheredens.particles.run_particles`, whether it shows a
    bar or not) reports to ``listener``: a sweep's case tells its client how far it has got.

    Parameters
    ----------
    listener : callable
        Called with one dict per event: ``event`` (``"start"``, ``"step"`` or ``"finish"``),
        ``t``, ``t_start``, ``t_end`` (model time), ``wall`` (seconds since the start) and
        ``steps``; at ``"finish"`` also ``stop_reason``. An exception it raises is logged,
        never propagated: reporting does not stop a run.
    interval : float
        ``"step"`` events come at most every ``interval`` seconds of wall time (> 0).
    """
    if not interval > 0:
        raise ValueError(f"interval must be a number of seconds > 0, got {interval!r}")
    token = _listener.set((listener, float(interval)))
    try:
        yield
    finally:
        _listener.reset(token)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ZMQ shell), where progress bars
    are shown although stderr is not a terminal."""
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel.zmqshell" not in sys.modules:
        return False
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def progress_wanted(enabled: bool | None, stream: Any = None) -> bool:
    """The rule for every progress bar of spheredens: ``enabled`` when given (True forces the
    bar, False turns it off); otherwise (None) on when ``stream`` (default stderr) is a
    terminal, or in a Jupyter notebook when writing to the default stream; off in scripts,
    pipes, logs and tests."""
    if enabled is not None:
        return bool(enabled)
    target = stream if stream is not None else sys.stderr
    isatty = getattr(target, "isatty", None)
    try:
        if isatty is not None and isatty():
            return True
    except ValueError:  # a closed stream
        return False
    return stream is None and in_notebook()


def progress_bar(
    total: float,
    *,
    enabled: bool | None = None,
    stream: Any = None,
    initial: float = 0,
    delay: float = 0.0,
    desc: str = "",
    bar_format: str | None = None,
) -> Any:
    """A tqdm bar (``tqdm.auto``: a widget in a notebook that has ipywidgets, text elsewhere)
    counting up to ``total``, or None when :func:`progress_wanted` says no or there is nothing
    to count. ``delay``: seconds before it appears (short tasks show none); it redraws at most
    5 times a second. Update it with ``bar.update(dn)``, end it with ``bar.close()``."""
    if not progress_wanted(enabled, stream) or not total > 0:
        return None
    return tqdm_auto.tqdm(
        total=total,
        initial=initial,
        file=stream if stream is not None else sys.stderr,
        delay=delay,
        mininterval=0.2,
        desc=desc or None,
        bar_format=bar_format,
        leave=True,
        dynamic_ncols=True,
    )


class Progress(Observer):
    """The progress of a run: model time t against t_end as a tqdm bar on stderr
    (:func:`progress_bar`), with the wall time elapsed and an estimate of the time left.

    Parameters
    ----------
    stream : file, optional
        Where the bar goes (default: sys.stderr; in a notebook with ipywidgets, a widget).
    delay : float, optional
        Seconds of wall time before the bar appears: runs shorter than that show none (default
        :attr:`DELAY`).
    enabled : bool, optional
        True: always a bar; False: never; None (default): on a terminal or in a Jupyter
        notebook only (:func:`progress_wanted`).
    desc : str
        A label before the bar.

    Notes
    -----
    Inside :func:`progress_listener` the observer also reports to that listener, bar or not.
    """

    #: the bar: model time t of t_end, the percentage, wall time elapsed and left
    BAR_FORMAT = (
        "{desc}t = {n:.4g} / {total:.4g} |{bar}| {percentage:5.1f}%  "
        "{elapsed} elapsed, ~{remaining} left"
    )
    #: seconds before a bar appears, unless ``delay`` is given
    DELAY = 2.0

    def __init__(
        self,
        stream: Any = None,
        *,
        delay: float | None = None,
        enabled: bool | None = None,
        desc: str = "",
    ) -> None:
        self.stream = stream
        self.enabled = progress_wanted(enabled, stream)
        self.delay, self.desc = self.DELAY if delay is None else float(delay), desc
        self._bar: Any = None
        self._listener = _listener.get()
        self._steps = 0

    def start(self, info: dict[str, Any]) -> None:
        self._t0, self._t_start, self._t_end = _time.perf_counter(), info["t_start"], info["t_end"]
        self._steps = int(info.get("steps_done", 0))
        self._last_report = self._t0
        if self.enabled:
            self._bar = progress_bar(
                self._t_end,
                enabled=True,
                stream=self.stream,
                initial=self._t_start,
                delay=self.delay,
                desc=f"{self.desc}: " if self.desc else "",
                bar_format=self.BAR_FORMAT,
            )
        self._report("start", self._t_start)

    def observe(self, t: float, state: Array) -> None:
        pass

    def step(self, t: float, dt: float, state: Array | None = None) -> None:
        self._steps += 1
        if self._bar is not None:
            self._bar.update(t - self._bar.n)
        if self._listener is not None:
            now = _time.perf_counter()
            if now - self._last_report >= self._listener[1]:
                self._last_report = now
                self._report("step", t)

    def finish(self, result: SimulationResult) -> None:
        if self._bar is not None:
            self._bar.n = result.t  # drawn by close() when the bar was shown
            self._bar.close()
            self._bar = None
        self._report("finish", result.t, stop_reason=result.stop_reason)

    def _report(self, event: str, t: float, **extra: Any) -> None:
        if self._listener is None:
            return
        try:
            self._listener[0](
                {
                    "event": event,
                    "t": float(t),
                    "t_start": float(self._t_start),
                    "t_end": float(self._t_end),
                    "wall": _time.perf_counter() - self._t0,
                    "steps": self._steps,
                    **extra,
                }
            )
        except Exception as exc:  # reporting never stops a run
            logger.warning("progress listener failed: %s", exc)
