"""A throwaway PostgreSQL database with the portal's schema, for benchmarks."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@contextlib.contextmanager
def own_database(suffix: str):
    """An empty database ``<name>_<suffix>`` named by DATABASE_URL from here on; dropped afterwards."""
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_portal")
    if not url.startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL server (the bench creates and drops its own database)")
    import psycopg

    base, _, name = url.rpartition("/")
    bench_db = f"{name.split('?')[0]}_{suffix}"
    admin = psycopg.connect(f"{base}/postgres", autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{bench_db}"')
    os.environ["DATABASE_URL"] = f"{base}/{bench_db}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    try:
        yield os.environ["DATABASE_URL"]
    finally:
        if "django.db" in sys.modules:
            from django.db import connections

            connections.close_all()
        admin.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
        admin.close()


@contextlib.contextmanager
def portal_database(suffix: str):
    """``own_database`` with the portal's schema migrated and Django set up on it."""
    with own_database(suffix):
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        yield
