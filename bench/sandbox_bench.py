"""Benchmark of the sandbox cluster: is it fast enough to stand in for a cluster in tests?

Run: ``.venv/bin/python bench/sandbox_bench.py`` (about half a minute).

Measures, against an in-process sandbox through the official client:

1. server-side apply throughput of 5,000 ConfigMaps (and 1,000 Notebooks);
2. list latency of 5,000 objects, in one call and paginated with limit=500, both
   through the typed client (including its model deserialization) and as a raw HTTP
   GET (the server's own cost);

and, in the same run, baselines to judge those against: a raw HTTP GET of a trivial
endpoint (/version, the per-request floor) and ``json.dumps``/``json.loads`` of the
same 5,000 objects (the serialization floor).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client  # noqa: E402

from sandbox.testing import DEFAULT_PROFILE, running_sandbox  # noqa: E402

N = 5000
N_NOTEBOOKS = 1000
APPLY = "application/apply-patch+yaml"


def configmap(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"bench-{i:05d}", "namespace": "bench", "labels": {"bench": "yes", "shard": str(i % 10)}},
        "data": {"index": str(i), "payload": "x" * 200},
    }


def notebook(i: int) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": f"nb-{i:05d}", "namespace": "bench", "labels": {"bench": "yes"}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": f"nb-{i:05d}",
                            "image": "kubeflownotebookswg/jupyter-scipy:v1.9.0",
                            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                        }
                    ]
                }
            }
        },
    }


def timed(fn, repeat: int = 5) -> float:
    """Median seconds of ``repeat`` runs."""
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def raw_get(url: str, token: str) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def main() -> None:
    with running_sandbox(DEFAULT_PROFILE) as sb:
        api = sb.api_client()
        core = client.CoreV1Api(api)
        custom = client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": "bench"}})

        started = time.perf_counter()
        for i in range(N):
            core.patch_namespaced_config_map(
                f"bench-{i:05d}", "bench", configmap(i), field_manager="bench", _content_type=APPLY
            )
        apply_cm = time.perf_counter() - started

        started = time.perf_counter()
        for i in range(N_NOTEBOOKS):
            custom.patch_namespaced_custom_object(
                "kubeflow.org",
                "v1",
                "bench",
                "notebooks",
                f"nb-{i:05d}",
                notebook(i),
                field_manager="bench",
                _content_type=APPLY,
            )
        apply_nb = time.perf_counter() - started

        list_url = f"{sb.url}/api/v1/namespaces/bench/configmaps"
        one_typed = timed(lambda: core.list_namespaced_config_map("bench"))
        one_raw = timed(lambda: raw_get(list_url, sb.token))

        def paginated_typed() -> None:
            token = None
            while True:
                page = core.list_namespaced_config_map("bench", limit=500, _continue=token)
                token = page.metadata._continue
                if not token:
                    return

        def paginated_raw() -> None:
            token = ""
            while True:
                body = raw_get(f"{list_url}?limit=500" + (f"&continue={token}" if token else ""), sb.token)
                # the token sits in the list metadata at the top; parsing every item would time the client
                match = re.search(rb'"continue":"([^"]+)"', body[:1000])
                if not match:
                    return
                token = match.group(1).decode()

        paged_typed = timed(paginated_typed)
        paged_raw = timed(paginated_raw)
        selector = timed(lambda: raw_get(f"{list_url}?labelSelector=shard%3D3", sb.token))

        objects = json.loads(raw_get(list_url, sb.token))["items"]
        assert len(objects) == N, len(objects)
        dumps = timed(lambda: json.dumps(objects, separators=(",", ":")))
        text = json.dumps(objects)
        loads = timed(lambda: json.loads(text))
        trivial = timed(lambda: raw_get(f"{sb.url}/version", sb.token), repeat=200)

    rows = [
        ("apply ConfigMaps (SSA, typed client)", f"{N / apply_cm:,.0f} objects/s", f"{apply_cm:.2f} s for {N}"),
        (
            "apply Notebooks (SSA, CustomObjectsApi)",
            f"{N_NOTEBOOKS / apply_nb:,.0f} objects/s",
            f"{apply_nb:.2f} s for {N_NOTEBOOKS}",
        ),
        ("list 5,000, one call, raw HTTP", f"{one_raw * 1000:.1f} ms", f"{one_raw / dumps:.1f}x json.dumps"),
        ("list 5,000, one call, typed client", f"{one_typed * 1000:.1f} ms", f"{one_typed / one_raw:.1f}x raw"),
        ("list 5,000, limit=500 pages, raw HTTP", f"{paged_raw * 1000:.1f} ms", f"{paged_raw / one_raw:.1f}x one call"),
        (
            "list 5,000, limit=500 pages, typed",
            f"{paged_typed * 1000:.1f} ms",
            f"{paged_typed / paged_raw:.1f}x raw pages",
        ),
        ("list with labelSelector (500 of 5,000)", f"{selector * 1000:.1f} ms", f"{selector / one_raw:.2f}x full list"),
        ("baseline: GET /version, raw HTTP", f"{trivial * 1000:.2f} ms", f"{1 / trivial:,.0f} requests/s"),
        ("baseline: json.dumps of the 5,000 objects", f"{dumps * 1000:.1f} ms", f"{len(text) / 1e6:.1f} MB"),
        ("baseline: json.loads of the 5,000 objects", f"{loads * 1000:.1f} ms", ""),
        ("apply vs trivial GET", f"{(apply_cm / N) / trivial:.1f}x", "per-request cost of an apply"),
    ]
    width = max(len(r[0]) for r in rows)
    print("Sandbox cluster benchmark (in-process server, official kubernetes client)")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>16}  {note}")


if __name__ == "__main__":
    main()
