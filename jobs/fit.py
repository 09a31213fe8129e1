"""Could the cluster ever hold a request? A pure check against the nodes' capacity.

Quota admission counts what a team may use; it does not know how big the cluster is.
Without this check, a training run of 3 nodes x 8 H100 on a cluster with two 8-GPU
H100 nodes is admitted (or approved over quota), holds its quota and waits in the queue
forever. Here a request is compared with the offering's node inventory: the units each
node holds at most (``Offering.node_units``, observed by ``jobs.capacity`` every
refresh; a snapshot, so a request is never refused on a live query's hiccup).

The rule, for N pods of G units each that must run at the same time (a training gang,
an endpoint's replicas, a notebook's single pod):

1. A pod is placed on one node, so G must not exceed the largest node's units.
2. Pods may share a node (the scheduler packs them) but not split across nodes, so a
   node of c units holds ``c // G`` pods and the cluster ``sum(c // G)``; N must not
   exceed that.

An endpoint is checked at its minimum replicas (it must come up) and at its maximum
(it is charged for them; replicas that can never be placed would hold quota for
nothing). CPU-only offerings and offerings whose inventory is unknown pass: without
the numbers, the scheduler decides, as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NOUNS = {"gpu": ("GPU", "GPUs"), "mig": ("MIG slice", "MIG slices"), "shared": ("shared GPU", "shared GPUs")}


@dataclass(frozen=True)
class Inventory:
    """The units of one offering each of the cluster's nodes holds at most."""

    offering: str  # slug, for messages
    kind: str  # "gpu" | "mig" | "shared"
    node_units: tuple[int, ...]

    @classmethod
    def of(cls, offering: Any) -> Inventory | None:
        """From an offering row; None when there is nothing to check against."""
        units = getattr(offering, "node_units", None)
        if offering.kind == "cpu" or units is None:
            return None
        return cls(offering.slug, offering.kind, tuple(sorted((int(u) for u in units if int(u) > 0), reverse=True)))

    def units(self, n: int) -> str:
        singular, plural = NOUNS.get(self.kind, ("unit", "units"))
        return f"{n} {singular if n == 1 else plural}"

    @property
    def largest_node(self) -> int:
        return max(self.node_units, default=0)

    def pods_that_fit(self, per_pod: int) -> int:
        """How many pods of ``per_pod`` units the nodes hold at once, packed."""
        if per_pod <= 0:
            return 0
        return sum(c // per_pod for c in self.node_units)

    def describe(self) -> str:
        """ "2 nodes x 8 GPUs of h100-80gb"; mixed sizes: "1 node x 8 and 2 nodes x 4 GPUs of ..."."""
        counts = sorted(Counter(self.node_units).items(), reverse=True)
        parts = [f"{n} node{'' if n == 1 else 's'} x {c}" for c, n in counts]
        if not parts:
            return f"no node with {self.offering}"
        noun = NOUNS.get(self.kind, ("unit", "units"))[1]
        return f"{' and '.join(parts)} {noun} of {self.offering}"


def problems(
    inventory: Inventory | None, *, kind: str, gpus_per_replica: int, replicas: int, max_replicas: int
) -> dict[str, list[str]]:
    """Field -> messages for a request the cluster can never hold; empty when it can."""
    if inventory is None:
        return {}
    if not inventory.node_units:
        return {"offering": [f"no node of the cluster has {inventory.offering}; choose another offering"]}
    errors: dict[str, list[str]] = {}
    per_pod = gpus_per_replica
    exist = f"at most {inventory.describe()} exist"
    if per_pod > inventory.largest_node:
        errors["gpus_per_replica"] = [
            f"a replica runs on one node, and no node has {inventory.units(per_pod)}: {exist}"
        ]
        return errors
    room = inventory.pods_that_fit(per_pod)

    def too_many(n: int) -> str:
        return (
            f"the cluster can never run {n} replicas of {inventory.units(per_pod)} at once: {exist}, "
            f"room for {room} replica{'' if room == 1 else 's'} of {per_pod}"
        )

    if kind == "endpoint":
        if replicas > room:
            errors["min_replicas"] = [too_many(replicas)]
        if max_replicas > room:
            errors["max_replicas"] = [too_many(max_replicas)]
    elif replicas > room:
        errors["replicas"] = [too_many(replicas)]
    return errors


def problems_of(spec_or_row: Any, offering: Any) -> dict[str, list[str]]:
    """``problems`` for a ``WorkloadSpec`` or a ``Workload`` row (same field names)."""
    return problems(
        Inventory.of(offering),
        kind=str(spec_or_row.kind),
        gpus_per_replica=spec_or_row.gpus_per_replica,
        replicas=spec_or_row.replicas,
        max_replicas=spec_or_row.max_replicas,
    )


def summary(errors: dict[str, Sequence[str]]) -> str:
    """One line for people who read no field names (the approvals console)."""
    return "; ".join(m for messages in errors.values() for m in messages)
