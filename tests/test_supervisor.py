"""`make run` keeps its processes up: one that dies starts again after a pause; Ctrl-C stops them all.

The end-to-end tests run the supervisor in a subprocess of its own, as ``rundev`` runs it,
with small Python programs standing in for the sandbox, web server and worker.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from portal.supervisor import Child, Supervisor
from tests.conftest import REPO_ROOT

# Prints its pid, then waits to be stopped.
SLEEPER = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(120)"

SUPERVISED = textwrap.dedent(
    f"""
    import sys
    from portal.supervisor import Child, Supervisor

    sleeper = [sys.executable, "-c", {SLEEPER!r}]
    sup = Supervisor(
        [Child("web", sleeper), Child("worker", sleeper)],
        write=lambda line: print(line, flush=True),
        backoff_first=0.2,
        poll=0.05,
    )
    sup.stop_on_signals()
    sup.run(on_started=lambda: print("all started", flush=True))
    print("supervisor done", flush=True)
    """
)


class Lines:
    """The supervisor's output, read by a thread so a test can wait for a line with a timeout."""

    def __init__(self, proc: subprocess.Popen):
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc):
        for line in proc.stdout:
            self.queue.put(line.rstrip("\n"))

    def wait_for(self, predicate, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if predicate(line):
                return line
        raise AssertionError("no such line; output so far:\n" + "\n".join(self.seen))


def child_pid(line: str, name: str) -> int | None:
    prefix = f"{name:>7} | pid "
    return int(line.removeprefix(prefix)) if line.startswith(prefix) else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its parent has not reaped it yet but it runs no more.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def supervised():
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISED],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    yield proc, Lines(proc)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def started(lines: Lines) -> dict[str, int]:
    pids: dict[str, int] = {}
    while len(pids) < 2:
        line = lines.wait_for(lambda ln: child_pid(ln, "web") or child_pid(ln, "worker"))
        for name in ("web", "worker"):
            if child_pid(line, name):
                pids[name] = child_pid(line, name)
    return pids


def test_a_killed_worker_is_started_again_and_the_others_keep_running(supervised):
    proc, lines = supervised
    pids = started(lines)
    os.kill(pids["worker"], signal.SIGKILL)
    lines.wait_for(lambda ln: ln == "supervisor | worker was killed by SIGKILL; starting it again in 0.2 s")
    line = lines.wait_for(lambda ln: child_pid(ln, "worker") is not None)
    new_worker = child_pid(line, "worker")
    assert new_worker != pids["worker"] and alive(new_worker)
    assert alive(pids["web"])  # untouched
    assert proc.poll() is None  # and the supervisor goes on


def test_ctrl_c_stops_the_supervisor_and_every_child(supervised):
    proc, lines = supervised
    pids = started(lines)
    if "all started" not in lines.seen:
        lines.wait_for(lambda ln: ln == "all started")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    lines.wait_for(lambda ln: ln == "supervisor done")
    assert not any(alive(pid) for pid in pids.values())


# -- the restart policy, with a clock the test moves -------------------------------------------


def crashing_supervisor(**kwargs):
    out: list[str] = []
    child = Child("worker", [sys.executable, "-c", "import sys; sys.exit(3)"])
    sup = Supervisor([child], write=out.append, **kwargs)
    sup.start()
    return sup, child, out


def crash_and_check(sup, child, ran: float) -> None:
    """Let the child die, then look at it as if ``ran`` seconds had passed since its start."""
    child.proc.wait(timeout=20)
    sup.check(now=child.started_at + ran)


def restart(sup, child) -> None:
    sup.check(now=child.restart_at)


def test_the_pause_doubles_with_each_crash_in_a_row_up_to_the_maximum():
    sup, child, out = crashing_supervisor(backoff_first=1, backoff_max=4, quick_failure=0, give_up_after=99)
    try:
        for _ in range(4):
            crash_and_check(sup, child, ran=0.5)
            restart(sup, child)
        crash_and_check(sup, child, ran=0.5)
    finally:
        sup.shutdown()
    pauses = [line for line in out if "starting it again" in line]
    assert pauses == [f"supervisor | worker exited with code 3; starting it again in {n} s" for n in (1, 2, 4, 4, 4)]
    assert child.restarts == 4


def test_a_process_that_ran_a_while_before_it_died_gets_the_shortest_pause_again():
    sup, child, out = crashing_supervisor(backoff_first=1, healthy_after=30, quick_failure=0, give_up_after=99)
    try:
        crash_and_check(sup, child, ran=1)
        restart(sup, child)
        crash_and_check(sup, child, ran=1)
        restart(sup, child)
        crash_and_check(sup, child, ran=60)
    finally:
        sup.shutdown()
    assert [line.rsplit(" in ", 1)[1] for line in out if "starting it again" in line] == ["1 s", "2 s", "1 s"]


def test_a_process_that_keeps_dying_at_start_stops_everything_with_the_reason():
    sup, child, out = crashing_supervisor(backoff_first=1, quick_failure=5, give_up_after=3)
    try:
        for _ in range(2):
            crash_and_check(sup, child, ran=0.1)
            restart(sup, child)
        crash_and_check(sup, child, ran=0.1)
    finally:
        sup.shutdown()
    assert sup.stop.is_set()
    assert out[-1] == (
        "supervisor | worker exited with code 3, 3 times in a row within 5 s of starting; "
        "stopping everything (see its output above)"
    )
