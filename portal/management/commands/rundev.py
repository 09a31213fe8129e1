"""Start everything a laptop needs in one terminal; Ctrl-C stops it all.

The sandbox cluster, the web server, a Celery worker and Celery beat run as real,
separate processes, exactly as they would in production, so what works here works
with a real cluster and broker too. ``portal.supervisor`` starts one that dies again.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.supervisor import Child, Supervisor

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
        children = [
            Child(name, cmd, ready=self._sandbox_ready if name == "sandbox" else None) for name, cmd in commands
        ]
        supervisor = Supervisor(children, write=self.stdout.write, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._stop = supervisor.stop
        supervisor.stop_on_signals()
        supervisor.run(on_started=lambda: self._banner(port, supervisor.write))

    def _banner(self, port: int, write) -> None:
        write(self.style.SUCCESS(f"\nGPU portal: http://127.0.0.1:{port}/"))
        write(f"  logins: alice, bob, carol, admin; password {settings.DEMO_PASSWORD!r}")
        write("  A process that dies is started again. Ctrl-C stops everything.\n")

    def _sandbox_ready(self, proc: subprocess.Popen) -> None:
        self._wait_for_port(SANDBOX_PORT, proc)

    def _wait_for_port(self, port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
        """The web server and worker must not start before the cluster answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None and not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
