"""Keep `make run`'s processes running: restart one that dies, stop them all on Ctrl-C.

``rundev`` starts the sandbox, the web server, a Celery worker and beat as separate
processes. A worker killed (by the OOM killer, by hand to test a retry) used to take the
whole `make run` down with it; now the supervisor starts it again, after a pause that
doubles with each crash in a row (1 s, 2 s, 4 s ... at most 30 s) so a process that
cannot start does not spin, and says so in one line. A process that ran for a while
before it died starts again after the shortest pause.

A process that dies ``GIVE_UP_AFTER`` times in a row within seconds of starting (a
port in use, a broken setting) will not get better by itself: the supervisor then
stops everything and says why, as before.

Ctrl-C (SIGINT) or SIGTERM stops everything: each process gets SIGTERM (Celery stops its
pool itself), and a process group still there after ``STOP_TIMEOUT`` is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
HEALTHY_AFTER = 30.0  # seconds up after which a crash counts as the first of a new series
QUICK_FAILURE = 5.0  # seconds: dying this soon after a start counts towards giving up
GIVE_UP_AFTER = 5
STOP_TIMEOUT = 10.0


@dataclass
class Child:
    name: str
    cmd: Sequence[str]
    # Called after the (first) start with the process: returns when it is ready for the others.
    ready: Callable[[subprocess.Popen], None] | None = None
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    crashes: int = 0  # in a row
    quick_crashes: int = 0  # in a row, each soon after its start
    restart_at: float | None = None
    restarts: int = 0
    threads: list[threading.Thread] = field(default_factory=list)


def exit_description(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Supervisor:
    def __init__(
        self,
        children: Sequence[Child],
        *,
        write: Callable[[str], None],
        env: dict[str, str] | None = None,
        backoff_first: float = BACKOFF_FIRST,
        backoff_max: float = BACKOFF_MAX,
        healthy_after: float = HEALTHY_AFTER,
        quick_failure: float = QUICK_FAILURE,
        give_up_after: int = GIVE_UP_AFTER,
        poll: float = 0.2,
    ) -> None:
        self.children = list(children)
        self._write = write
        self._lock = threading.Lock()
        self.env = env
        self.backoff_first, self.backoff_max = backoff_first, backoff_max
        self.healthy_after, self.quick_failure, self.give_up_after = healthy_after, quick_failure, give_up_after
        self.poll = poll
        self.stop = threading.Event()

    def write(self, line: str) -> None:
        with self._lock:  # the pipe threads write too; one line at a time
            self._write(line)

    # -- starting ---------------------------------------------------------------------------

    def _spawn(self, child: Child) -> None:
        child.proc = subprocess.Popen(
            list(child.cmd),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C reaches only us; we stop the children in order
        )
        child.started_at = time.monotonic()
        thread = threading.Thread(target=self._pipe, args=(child.name, child.proc), daemon=True)
        thread.start()
        child.threads.append(thread)

    def _pipe(self, name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.write(f"{name:>7} | {line.rstrip()}")

    def start(self) -> None:
        for child in self.children:
            if self.stop.is_set():
                return
            self._spawn(child)
            if child.ready is not None:
                child.ready(child.proc)

    # -- watching ---------------------------------------------------------------------------

    def check(self, now: float | None = None) -> None:
        """One look at every child: schedule a restart for the dead, restart those whose pause is over."""
        now = time.monotonic() if now is None else now
        for child in self.children:
            proc = child.proc
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    child.restarts += 1
                    self._spawn(child)
                    self.write(f"supervisor | {child.name} started again (pid {child.proc.pid})")
                continue
            if proc is None or proc.poll() is None:
                continue
            ran = now - child.started_at
            child.crashes = 1 if ran >= self.healthy_after else child.crashes + 1
            child.quick_crashes = child.quick_crashes + 1 if ran < self.quick_failure else 0
            what = exit_description(proc.returncode)
            if child.quick_crashes >= self.give_up_after:
                self.write(
                    f"supervisor | {child.name} {what}, {child.quick_crashes} times in a row within "
                    f"{self.quick_failure:g} s of starting; stopping everything (see its output above)"
                )
                self.stop.set()
                return
            delay = min(self.backoff_first * 2 ** (child.crashes - 1), self.backoff_max)
            child.restart_at = now + delay
            self.write(f"supervisor | {child.name} {what}; starting it again in {delay:g} s")

    def run(self, on_started: Callable[[], None] | None = None) -> None:
        """Start the children and keep them running until ``stop`` is set; then stop them all."""
        try:
            self.start()
            if on_started is not None and not self.stop.is_set():
                on_started()
            while not self.stop.is_set():
                self.check()
                self.stop.wait(self.poll)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        procs = [c.proc for c in self.children if c.proc is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()

    def stop_on_signals(self) -> None:
        """Ctrl-C and SIGTERM end ``run``. Main thread only (Python's rule for signal handlers)."""
        signal.signal(signal.SIGINT, lambda *_: self.stop.set())
        signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
