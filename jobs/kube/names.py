"""Deterministic, DNS-safe names of everything the portal creates.

A name depends only on its inputs, never on a clock or a counter, so a retried task
applies to the same object instead of creating a second one. Names that would be too
long are trimmed and given a short hash of the full name, which keeps them unique and
stable (the same long input always gives the same short name).

Workload names are validated as RFC 1035 labels of at most 40 characters
(``jobs.specs.MAX_NAME_LENGTH``), so ``<name>-workspace`` and the names controllers
derive (``<name>-predictor-...``, ``<name>-worker-3``) fit without trimming; the
trimming here is the second guard.

Within a team namespace, the portal assumes a workload name is unique across kinds:
a Notebook and a TrainJob called ``x`` would both want the ``x-gpu`` claim template
(and the notebook controller and Volcano's svc plugin both a Service ``x``).
"""

from __future__ import annotations

import hashlib
import re

DNS_LABEL_MAX = 63
_HASH_LENGTH = 8
_NOT_DNS = re.compile(r"[^a-z0-9-]+")

# Team-level objects, one of each per team namespace.
WORKLOAD_SERVICE_ACCOUNT = "gpu-portal-workload"
RESOURCE_QUOTA_NAME = "gpu-quota"
NETWORK_POLICY_NAME = "gpu-portal-default"

# Cluster-scoped PriorityClasses. Admission picks one per workload: guaranteed while the
# team stays within its guaranteed share, preemptible when it borrows idle capacity.
PRIORITY_GUARANTEED = "gpu-portal-guaranteed"
PRIORITY_PREEMPTIBLE = "gpu-portal-preemptible"
PRIORITY_CLASSES = (PRIORITY_GUARANTEED, PRIORITY_PREEMPTIBLE)

# Kubeflow Trainer v2.3.0 cannot set priorityClassName from a TrainJob (runtimePatches
# allow no such field), so there is one ClusterTrainingRuntime per priority class (and, on a
# Kueue cluster, one without Volcano's gang scheduling, ``...-kueue-<tier>``).
TORCH_RUNTIME_PREFIX = "gpu-portal-torch-distributed"

# Kueue: the LocalQueue every team namespace has (quotas.kueue.LOCAL_QUEUE_NAME; a test pins
# the two together). The same name everywhere, so building a workload needs no team lookup.
KUEUE_LOCAL_QUEUE = "gpu-portal"

# Suffixes of the objects a workload owns besides its main object.
GPU_CLAIM_SUFFIX = "gpu"
WORKSPACE_SUFFIX = "workspace"


def dns_label(*parts: str, max_length: int = DNS_LABEL_MAX) -> str:
    """Join ``parts`` with '-' into a lowercase RFC 1035 label of at most ``max_length``.

    1. Lowercase, replace anything outside ``[a-z0-9-]`` by '-', squeeze and strip dashes.
       (Validated names pass through unchanged; this only keeps a bug from producing
       a name the API server refuses.)
    2. A label must start with a letter: prefix 'x-' when it does not.
    3. When too long, keep a prefix and append '-' and 8 hex digits of the SHA-256 of
       the whole untrimmed name, so different long inputs stay different.
    """
    raw = "-".join(p for p in parts if p)
    name = _NOT_DNS.sub("-", raw.lower())
    name = re.sub(r"-{2,}", "-", name).strip("-") or "x"
    if not name[0].isalpha():
        name = "x-" + name
    if len(name) <= max_length:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:_HASH_LENGTH]
    keep = max_length - _HASH_LENGTH - 1
    return f"{name[:keep].rstrip('-')}-{digest}"


def team_queue_name(team_slug: str) -> str:
    """The Volcano Queue of a team: ``team-<slug>``.

    Queues are cluster-scoped, so the prefix keeps team queues apart from Volcano's own
    ``default`` and ``root`` queues (a team called "default" must not share them).
    """
    return dns_label("team", team_slug)


def workload_name(name: str) -> str:
    """Name of a workload's main object (Notebook, TrainJob, Volcano Job, JobSet, InferenceService)."""
    return dns_label(name)


def gpu_claim_template_name(name: str) -> str:
    """ResourceClaimTemplate of a DRA workload; each pod gets its own claim from it."""
    return dns_label(name, GPU_CLAIM_SUFFIX)


def workspace_pvc_name(name: str) -> str:
    """PersistentVolumeClaim holding a notebook's home directory."""
    return dns_label(name, WORKSPACE_SUFFIX)


def torch_runtime_name(priority_class: str, queueing: str = "volcano") -> str:
    """ClusterTrainingRuntime for torch TrainJobs of one priority class.

    ``gpu-portal-guaranteed`` -> ``gpu-portal-torch-distributed-guaranteed``; on a Kueue
    cluster ``gpu-portal-torch-distributed-kueue-guaranteed``.
    """
    tier = priority_class.removeprefix("gpu-portal-")
    if queueing == "kueue":
        return dns_label(TORCH_RUNTIME_PREFIX, "kueue", tier)
    return dns_label(TORCH_RUNTIME_PREFIX, tier)
