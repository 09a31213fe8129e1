"""Configuration objects a real cluster's add-ons carry (ConfigMaps, DaemonSets).

The portal reads them in ``cluster_check`` and the sandbox's controllers follow them, so a
cluster configured like upstream's defaults (``cluster_setup: stock``) misbehaves in the
sandbox exactly where it would misbehave for real. Each add-on contributes a seeder: a
function ``(profile) -> list of (resource key, object)`` created once if absent, so an
operator's later edit through the API survives a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from portal.cluster_profile import ClusterProfile

Seeder = Callable[[ClusterProfile], list[tuple[str, dict[str, Any]]]]

SEEDERS: list[Seeder] = []


def seed(sandbox: Any) -> None:
    """Create each seeder's objects that the store does not hold yet (namespaces first)."""
    api, store, registry = sandbox.api, sandbox.store, sandbox.registry
    for seeder in SEEDERS:
        for key, obj in seeder(sandbox.profile):
            namespace = obj["metadata"].get("namespace")
            if namespace and store.get("/namespaces", "", namespace) is None:
                api.create(
                    registry.by_key("/namespaces"),
                    None,
                    {"metadata": {"name": namespace}},
                    manager="sandbox",
                    internal=True,
                )
            if store.get(key, namespace or "", obj["metadata"]["name"]) is None:
                api.create(registry.by_key(key), namespace, obj, manager="sandbox", internal=True)


# Seeders register after SEEDERS exists; each module is one add-on's configuration.
from sandbox import kueue_config, volcano_config  # noqa: E402
from sandbox.gpu_operator import exporter_daemonsets  # noqa: E402

SEEDERS.extend((exporter_daemonsets, volcano_config.seed, kueue_config.seed))

from sandbox import kserve_config  # noqa: E402

SEEDERS.append(kserve_config.seed)
