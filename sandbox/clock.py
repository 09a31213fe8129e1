"""The simulated clock.

It starts at the wall clock when a sandbox is first created (or at a given instant),
follows wall time while a server runs in real-time mode, and jumps forward with
``advance``. In tests real-time mode is off, so time moves only when a test says so.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class Clock:
    def __init__(self, start: float | None = None, realtime: bool = True):
        self._lock = threading.Lock()
        self._sim_at_anchor = float(start if start is not None else time.time())
        self._wall_anchor = time.monotonic()
        self.realtime = realtime

    def now(self) -> float:
        with self._lock:
            if not self.realtime:
                return self._sim_at_anchor
            return self._sim_at_anchor + (time.monotonic() - self._wall_anchor)

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("the simulated clock only moves forward")
        with self._lock:
            self._sim_at_anchor += seconds
        return self.now()

    def set(self, sim_time: float) -> None:
        with self._lock:
            self._sim_at_anchor = float(sim_time)
            self._wall_anchor = time.monotonic()

    def iso(self, at: float | None = None) -> str:
        return iso(self.now() if at is None else at)


def iso(at: float) -> str:
    """RFC 3339 with second precision, as Kubernetes writes timestamps."""
    return datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
