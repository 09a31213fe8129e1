"""The controller loop: one pass runs every controller once, in data-flow order.

    housekeeping (GC, namespaces, service accounts, PVCs, event expiry)
    -> Kueue (profiles with ``queueing: kueue``: Workloads, admission, resume and ungate)
    -> workload controllers (Notebook, StatefulSet, TrainJob, JobSet, Volcano Job, InferenceService) create pods
       (Volcano Job policies first: a gang that lost a pod to eviction restarts)
    -> ResourceClaim controller (claims from templates)
    -> scheduler (bind pods, assign devices)
    -> kubelet (start and finish pods)
    -> status of PodGroups, Queues and ResourceQuotas

``Sandbox.settle()`` repeats passes until one makes no writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from sandbox.controllers import (
    housekeeping,
    inference,
    jobsets,
    kubelet,
    kueue,
    notebooks,
    quotas,
    statefulsets,
    trainjobs,
    volcano,
    volcano_policies,
)
from sandbox.controllers.base import Ctx
from sandbox.scheduler import Scheduler

if TYPE_CHECKING:
    from sandbox.cluster import Sandbox

log = logging.getLogger("sandbox.controllers")

STEPS: tuple[tuple[str, Callable[[Ctx], None]], ...] = (
    ("housekeeping", housekeeping.reconcile),
    ("kueue", kueue.reconcile),
    ("notebooks", notebooks.reconcile),
    ("statefulsets", statefulsets.reconcile),
    ("trainjobs", trainjobs.reconcile),
    ("jobsets", jobsets.reconcile),
    ("volcano-job-policies", volcano_policies.reconcile),
    ("volcano-jobs", volcano.reconcile_jobs),
    ("inference", inference.reconcile),
    ("resource-claims", kubelet.reconcile_claims),
    ("scheduler", lambda ctx: Scheduler(ctx).run()),
    ("kubelet", kubelet.reconcile),
    ("volcano-status", volcano.reconcile_groups),
    ("quotas", quotas.reconcile),
)

_reported: set[str] = set()


def run_pass(sandbox: Sandbox) -> None:
    """One pass of every controller; the caller holds the store lock."""
    ctx = Ctx(sandbox)
    for name, step in STEPS:
        try:
            step(ctx)
        except Exception as exc:  # noqa: BLE001 - one broken object must not stop the other controllers
            key = f"{name}:{type(exc).__name__}:{exc}"
            if key not in _reported:
                _reported.add(key)
                log.exception("sandbox controller %s failed", name)
            sandbox.controller_errors.append(key)
