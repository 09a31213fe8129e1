"""Volcano's scheduler configuration, as the sandbox's Volcano reads and follows it.

Real Volcano reads the ConfigMap ``volcano-system/volcano-scheduler-configmap`` (key
``volcano-scheduler.conf``): a YAML text with an ``actions`` string and ``tiers`` of
plugins. The sandbox reads the same object on every scheduling pass, so editing it
through the API changes how the next pass schedules. What the sandbox follows:

* actions: ``allocate`` (place pending pods at all), ``enqueue`` (admit PodGroups; without
  it nothing leaves Pending), ``preempt`` (evict lower-priority pods of the same queue),
  ``reclaim`` (evict pods of queues above their deserved for a queue below its own);
* plugins: ``gang`` (all of a PodGroup's pods or none; without it pods go one by one),
  ``capacity`` (a queue may hold up to ``capability``; ``deserved`` decides reclaim) or
  ``proportion`` (a queue may hold up to a share computed from ``weight``, capped by
  ``capability``; ``deserved`` is ignored), ``priority`` (order and preempt by priority),
  ``predicates`` with ``predicate.DynamicResourceAllocationEnable`` (DRA claims).

A missing or unparsable ConfigMap falls back to Volcano's compiled-in default (as the
real scheduler does): actions ``enqueue, allocate, backfill`` and ``proportion``.

``seed`` is the sandbox's seeder: ``cluster_setup: recommended`` gets what the portal
needs (``portal.scheduler_config.volcano_scheduler_conf``), ``stock`` upstream's default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from portal.scheduler_config import (
    VOLCANO_CONF_KEY,
    VOLCANO_CONFIGMAP,
    VOLCANO_NAMESPACE,
    volcano_scheduler_configmap,
)

CONFIGMAPS = "/configmaps"

# Volcano v1.15.1 installer/helm/chart/volcano/config/volcano-scheduler.conf, verbatim: what a
# Helm install of Volcano ships (a test compares it with ../shared/reference when present).
STOCK_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


class ConfError(ValueError):
    """A scheduler configuration Volcano would not load."""


@dataclass(frozen=True)
class SchedulerConf:
    actions: tuple[str, ...]
    plugins: tuple[str, ...]  # every enabled plugin, tier by tier
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = "configmap"

    def action(self, name: str) -> bool:
        return name in self.actions

    def plugin(self, name: str) -> bool:
        return name in self.plugins

    @property
    def queue_plugins(self) -> tuple[str, ...]:
        """The enabled plugins that bound queues: ``capacity`` and/or ``proportion`` (Volcano's
        docs say never both; with both, both sets of bounds apply, as their callbacks would)."""
        return tuple(p for p in ("capacity", "proportion") if p in self.plugins)

    @property
    def dra(self) -> bool:
        value = self.arguments.get("predicates", {}).get("predicate.DynamicResourceAllocationEnable")
        return value is True or str(value).lower() == "true"


# pkg/scheduler/util.go DefaultSchedulerConf: used when the ConfigMap is missing or invalid.
BUILTIN = SchedulerConf(
    actions=("enqueue", "allocate", "backfill"),
    plugins=("priority", "gang", "conformance", "overcommit", "drf", "predicates", "proportion", "nodeorder"),
    source="built-in default",
)


def parse(text: str) -> SchedulerConf:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"{VOLCANO_CONF_KEY}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfError(f"{VOLCANO_CONF_KEY}: must be a mapping with actions and tiers")
    actions = data.get("actions")
    if not isinstance(actions, str) or not actions.strip():
        raise ConfError(f"{VOLCANO_CONF_KEY}: actions must be a comma-separated string")
    names = tuple(a.strip() for a in actions.split(",") if a.strip())
    plugins: list[str] = []
    arguments: dict[str, dict[str, Any]] = {}
    tiers = data.get("tiers") or []
    if not isinstance(tiers, list):
        raise ConfError(f"{VOLCANO_CONF_KEY}: tiers must be a list")
    for i, tier in enumerate(tiers):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins") or [], list):
            raise ConfError(f"{VOLCANO_CONF_KEY}: tiers[{i}].plugins must be a list")
        for j, plugin in enumerate(tier.get("plugins") or []):
            if not isinstance(plugin, dict) or not isinstance(plugin.get("name"), str):
                raise ConfError(f"{VOLCANO_CONF_KEY}: tiers[{i}].plugins[{j}].name is required")
            plugins.append(plugin["name"])
            if isinstance(plugin.get("arguments"), dict):
                arguments[plugin["name"]] = dict(plugin["arguments"])
    return SchedulerConf(names, tuple(plugins), arguments)


_cache: dict[str, SchedulerConf] = {}


def read(store: Any) -> SchedulerConf:
    """The configuration in the cluster's ConfigMap, or Volcano's built-in default."""
    cm = store.get(CONFIGMAPS, VOLCANO_NAMESPACE, VOLCANO_CONFIGMAP)
    text = ((cm or {}).get("data") or {}).get(VOLCANO_CONF_KEY)
    if not isinstance(text, str):
        return BUILTIN
    if text not in _cache:
        try:
            _cache[text] = parse(text)
        except ConfError:
            _cache[text] = BUILTIN
    return _cache[text]


def seed(profile: Any) -> list[tuple[str, dict[str, Any]]]:
    """Seeder for ``sandbox.setup_objects``: the ConfigMap of a Volcano cluster."""
    if getattr(profile, "queueing", "volcano") != "volcano":
        return []
    stock = getattr(profile, "cluster_setup", "recommended") == "stock"
    return [(CONFIGMAPS, volcano_scheduler_configmap(STOCK_CONF if stock else None))]
