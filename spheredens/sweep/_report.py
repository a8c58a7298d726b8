"""The progress report of a sweep on the client: :class:`SweepReporter`.

The dashboard's address at the start, each running case's model time against t_end (from the
events its worker publishes), its wall time when it ends and the time left.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

logger = logging.getLogger("spheredens.sweep")


def _dashboard_missing(link: str | None, timeout: float = 3.0) -> str | None:
    """None when the dashboard at ``link`` answers; else why there is none. A scheduler reports
    its HTTP server as the dashboard even when it serves no dashboard pages (started with
    --no-dashboard, or without bokeh): the page is asked for once."""
    if not link:
        return "the scheduler serves none; it needs bokeh"
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to it
        with opener.open(link, timeout=timeout) as answer:
            answer.read(1)
        return None
    except urllib.error.HTTPError as exc:
        return (
            f"{link} answers HTTP {exc.code}: the scheduler was started with --no-dashboard or "
            "without bokeh"
        )
    except (OSError, ValueError) as exc:  # not reachable from here (a tunnel may still reach it)
        return f"{link} does not answer from here: {exc}"


def _duration(seconds: float) -> str:
    """Wall time as a person reads it: 4.2 s, 3 min 12 s, 1 h 36 min."""
    if not seconds == seconds or seconds < 0:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


class SweepReporter:
    """What a sweep says as it goes, one line per event on ``stream`` (default: stderr).

    At the start the address of the Dask dashboard and how many cases run on how many worker
    threads; while a case runs, its model time t against t_end, the wall time it has taken and
    an estimate of the time left (the case's and the sweep's), at most once every ``interval``
    seconds per case (its workers publish that often); when a case ends, its outcome and wall
    time; at the end the sweep's wall time.

    The cases report through Dask's structured events: each worker publishes with
    ``distributed.Worker.log_event`` under one topic per sweep, and the client receives them
    with ``distributed.Client.subscribe_topic`` (:meth:`attach`) -- no polling of files.

    The estimate of the time left: a running case needs (t_end - t) / r more, r its model time
    per wall second since its first progress event (the steps before it, which include the
    set-up, are not extrapolated); a case not started takes the mean wall time of the finished
    and projected cases; the work left is shared by the worker threads (never less than the
    longest running case still needs).
    """

    def __init__(self, n_cases: int, *, stream: Any = None, interval: float = 5.0) -> None:
        self.n_cases, self.interval = n_cases, float(interval)
        self.stream = stream
        self.topic = f"spheredens-progress-{uuid.uuid4().hex}"
        self.slots = 1
        self._lock = threading.Lock()
        self._running: dict[str, dict[str, Any]] = {}  # case -> its last event, client clock
        self._walls: list[float] = []  # wall times of the cases that ran to the end
        self._done: set[str] = set()
        self._clock = time.monotonic()

    def line(self, text: str) -> None:
        """Write one line (from any thread) and flush it."""
        with self._lock:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write(text + "\n")
            stream.flush()

    def attach(self, client: Any, done_earlier: int = 0) -> None:
        """Subscribe to the cases' events on ``client`` and write the start lines: the dashboard
        address (``client.dashboard_link``), the cases and the worker threads."""
        self._clock = time.monotonic()
        try:
            link = client.dashboard_link
        except Exception:  # the scheduler serves no dashboard (no "dashboard" service)
            link = None
        try:
            self.slots = max(1, sum(client.nthreads().values()))
        except Exception as exc:
            logger.info("counting the worker threads: %s", exc)
        client.subscribe_topic(self.topic, self.event)
        why = _dashboard_missing(link)
        self.line(
            f"sweep: Dask dashboard at {link}"
            if why is None
            else f"sweep: no Dask dashboard ({why})"
        )
        earlier = f" ({done_earlier} done earlier)" if done_earlier else ""
        self.line(f"sweep: {self.n_cases} case(s) to run on {self.slots} worker thread(s){earlier}")

    def detach(self, client: Any) -> None:
        """Stop receiving the cases' events."""
        try:
            client.unsubscribe_topic(self.topic)
        except Exception as exc:  # the client is already closing: nothing more to receive
            logger.info("unsubscribing %s: %s", self.topic, exc)

    def event(self, event: Any) -> None:
        """Handler of ``Client.subscribe_topic``: ``event`` is (scheduler timestamp, message), the
        message a dict of :func:`spheredens.simulate.progress_listener` with ``case`` and
        ``worker``. Runs on the client's event loop: it only writes a line."""
        try:
            msg = event[1]
            case = str(msg["case"])
            if case in self._done or msg["event"] == "finish":
                return  # the outcome line says how it ended
            msg = {**msg, "received": time.monotonic(), "left": float("nan")}
            with self._lock:
                previous = self._running.get(case)
                if msg["event"] == "step":
                    # the rate since the case's first step event: the steps before it include
                    # the set-up (imports, plans), which is not extrapolated
                    first = previous.get("first") if previous is not None else None
                    msg["first"] = first if first is not None else (msg["t"], msg["wall"])
                    dt, dw = msg["t"] - msg["first"][0], msg["wall"] - msg["first"][1]
                    if dt > 0 and dw > 0:
                        msg["left"] = (msg["t_end"] - msg["t"]) * dw / dt
                self._running[case] = msg
            if msg["event"] == "start":
                where = f" on {msg['worker']}" if msg.get("worker") else ""
                resume = f", resuming at t = {msg['t_start']:.4g}" if msg["t_start"] > 0 else ""
                self.line(f"  {case}: started{where}{resume} (t_end = {msg['t_end']:.4g})")
                return
            self.line(
                f"  {case}: t = {msg['t']:.4g} / {msg['t_end']:.4g} "
                f"({100.0 * (msg['t'] / msg['t_end'] if msg['t_end'] > 0 else 1.0):.0f}%), "
                f"{_duration(msg['wall'])}"
                + (f", ~{_duration(msg['left'])} left" if msg["left"] == msg["left"] else "")
                + self._left()
            )
        except Exception as exc:  # a malformed event: never break the client's loop
            logger.info("sweep progress event %r: %s", event, exc)

    def finished(self, k: int, case: str, outcome: str, wall: float | None) -> None:
        """Case number ``k`` ended with ``outcome`` after ``wall`` seconds (None: unknown, e.g.
        a lost worker; then the time since its start event)."""
        with self._lock:
            self._done.add(case)
            last = self._running.pop(case, None)
            if wall is None and last is not None:
                wall = last["wall"] + time.monotonic() - last["received"]
            if outcome == "ran" and wall is not None:
                self._walls.append(wall)
        took = f" in {_duration(wall)}" if wall is not None else ""
        self.line(f"  [{k}/{self.n_cases}] {case}: {outcome}{took}{self._left()}")

    def close(self) -> None:
        """The end line: the sweep's wall time."""
        self.line(
            f"sweep: {len(self._done)} of {self.n_cases} case(s) ended in "
            f"{_duration(time.monotonic() - self._clock)}"
        )

    def time_left(self) -> float | None:
        """Estimated wall seconds until the last case ends (None: nothing to go on yet)."""
        now = time.monotonic()
        with self._lock:
            running = list(self._running.values())
            totals, lefts = list(self._walls), []
            for msg in running:
                since = now - msg["received"]
                if msg["left"] == msg["left"]:  # a rate is known
                    lefts.append(max(msg["left"] - since, 0.0))
                    totals.append(msg["wall"] + since + lefts[-1])
                else:
                    lefts.append(None)
            queued = self.n_cases - len(self._done) - len(running)
        if not totals:
            return None
        mean = sum(totals) / len(totals)
        lefts = [mean if v is None else v for v in lefts]
        work = sum(lefts) + max(queued, 0) * mean
        return max(work / self.slots, max(lefts, default=0.0))

    def _left(self) -> str:
        left = self.time_left()
        if left is None or len(self._done) == self.n_cases:
            return ""
        return f"; sweep ~{_duration(left)} left"
