"""Start everything a laptop needs in one terminal; Ctrl-C stops it all.

The sandbox cluster, the web server, a Celery worker and Celery beat run as real,
separate processes, exactly as they would in production, so what works here works
with a real cluster and broker too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

SANDBOX_PORT = 8765


class Command(BaseCommand):
    help = "Run the sandbox cluster, web server, Celery worker and beat together (development)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-sandbox", action="store_true", help="use PORTAL_KUBECONFIG's cluster instead")
        parser.add_argument("--reset-sandbox", action="store_true", help="start the sandbox cluster empty")

    def handle(self, *args, port, no_sandbox, reset_sandbox, **options):
        python = sys.executable
        var = Path(settings.VAR_DIR)
        var.mkdir(parents=True, exist_ok=True)
        commands: list[tuple[str, list[str]]] = []
        if not no_sandbox:
            sandbox = [
                python,
                "-m",
                "sandbox",
                "serve",
                "--profile",
                str(settings.CLUSTER_PROFILE),
                "--port",
                str(SANDBOX_PORT),
                "--state",
                str(var / "sandbox" / "state.json"),
                "--kubeconfig",
                settings.KUBE_CONFIG,
            ]
            # The sandbox validates custom resources against the upstream schemas it ships
            # (sandbox/crds/), the same on every clone; ../shared/reference is not needed.
            if reset_sandbox:
                sandbox.append("--reset")
            commands.append(("sandbox", sandbox))
        commands += [
            ("web", [python, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]),
            ("worker", [python, "-m", "celery", "-A", "portal", "worker", "--loglevel=INFO", "--concurrency=2"]),
            ("beat", [python, "-m", "celery", "-A", "portal", "beat", "--loglevel=INFO"]),
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        procs = []
        for name, cmd in commands:
            proc = subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
            )
            threading.Thread(target=self._pipe, args=(name, proc), daemon=True).start()
            procs.append((name, proc))
            if name == "sandbox":
                self._wait_for_port(SANDBOX_PORT, proc)
        self.stdout.write(self.style.SUCCESS(f"\nGPU portal: http://127.0.0.1:{port}/"))
        self.stdout.write(f"  logins: alice, bob, carol, admin; password {settings.DEMO_PASSWORD!r}")
        self.stdout.write("  Ctrl-C stops everything.\n")
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.is_set():
                for name, proc in procs:
                    if proc.poll() is not None:
                        self.stderr.write(f"{name} exited with code {proc.returncode}; stopping the rest")
                        stop.set()
                stop.wait(0.5)
        finally:
            # Each process stops its own children (Celery its pool) on SIGTERM; a whole
            # group is killed only if it has not stopped in time.
            for _, proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            deadline = time.monotonic() + 10
            for _, proc in procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)

    def _pipe(self, name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.stdout.write(f"{name:>7} | {line.rstrip()}")

    def _wait_for_port(self, port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
        """The web server and worker must not start before the cluster answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
