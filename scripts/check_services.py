"""Before the tests: are PostgreSQL and Redis reachable? One clear line if not."""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlparse

HOW = {
    "PostgreSQL": "start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "Redis": 'start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no',
}


def reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=3):
            return True
    except OSError:
        return False


def main() -> int:
    checks = [
        ("PostgreSQL", os.environ.get("DATABASE_URL", ""), 5432),
        ("Redis", os.environ.get("REDIS_URL", ""), 6379),
    ]
    failed = False
    for name, url, port in checks:
        if not url:
            print(f"{name}: no URL given (DATABASE_URL / REDIS_URL)", file=sys.stderr)
            failed = True
        elif not reachable(url, port):
            print(f"{name} is not reachable at {url}: {HOW[name]}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
