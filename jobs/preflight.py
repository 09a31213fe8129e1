"""Preflight: does the cluster's add-on configuration give the portal what it needs?

``manage.py cluster_check`` fetches a handful of configuration objects and hands them to
the pure functions here, which name every setting the portal needs that is missing and
how to fix it. Nothing here does I/O: each check takes the fetched object (a dict, or
``None`` when it was not found) and what the portal will ask of the cluster
(``PortalNeeds``, built from the cluster profile and the portal's own manifest builders,
so the checks follow the builders when they change).

What is read, and why the portal cares:

1. ``kserve/inferenceservice-config`` (KServe): ``deploy.defaultDeploymentMode`` decides
   whether an endpoint without a mode annotation becomes a Knative Service (upstream
   default "Serverless") or a plain Deployment ("Standard"/"RawDeployment").
   ``storageInitializer`` is the init container KServe injects into model pods; KServe
   v0.20 gives it no securityContext, so a namespace enforcing the restricted Pod
   Security Standard rejects the pod unless the ClusterStorageContainer ``default``
   gives it one (read as well).
2. ``knative-serving/config-features`` (only when some endpoint runs in Knative mode):
   Knative refuses pod-spec fields unless a feature flag allows them; the flags needed
   are derived from the predictor the portal builds (schedulerName for Volcano,
   priorityClassName, nodeSelector and tolerations for GPU nodes, the pod
   securityContext, ...). ``resourceClaims`` (DRA) is never allowed in Knative mode.
3. ``volcano-system/volcano-scheduler-configmap`` (Volcano clusters): the actions of the
   portal's own configuration (``portal/scheduler_config.py``, which the README prints and
   the sandbox runs): ``reclaim`` above all (without it a team's guarantee is never taken
   back from teams that borrowed above theirs; the shipped default has none) and
   ``preempt``; the plugins that read what the portal sets (gang, priority, predicates);
   ``capacity`` as the queue plugin (the shipped ``proportion`` never reads
   ``Queue.spec.deserved``, and the two must not run together); DRA in ``predicates``.
4. ``kueue-system/kueue-manager-config`` (Kueue clusters): against the portal's own
   configuration, the integrations the portal's workloads use, ``labelKeysToCopy`` (the
   portal finds Workloads by its labels), ``resources.excludeResourcePrefixes`` (cpu and
   memory, which the GPU-only ClusterQueues do not cover, but no GPU resource they count)
   and ``resources.deviceClassMappings`` for the DRA device classes of the profile's
   offerings, to the resource the ClusterQueues count (an unmapped DeviceClass makes
   Kueue mark the workload inadmissible).
5. The dcgm-exporter DaemonSets' environment: ``DCGM_EXPORTER_KUBERNETES`` (pod
   labels on GPU metrics at all: the binary's default is false),
   ``KUBERNETES_VIRTUAL_GPUS`` (time-sliced GPUs: without it shared GPUs carry no pod)
   and ``KUBERNETES_ENABLE_DRA`` (DRA-allocated GPUs carry no pod without it). The
   virtual-GPU path returns before the DRA step, so DRA GPUs need virtual GPUs off: with
   both kinds of offering, a second exporter (``nvidia-dcgm-exporter-dra``) on the DRA
   nodes only, as the sandbox's recommended setup has.

Upstream facts come from the reference data (``../shared/reference``): KServe v0.20.0,
Knative Serving knative-v1.21.1 (``podspec-fieldmask.csv``), Volcano v1.15.1, Kueue
v0.19.2, dcgm-exporter 4.5.3-4.8.2.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from portal import scheduler_config

OK = "ok"
FIX = "fix"  # present, but a setting the portal needs is missing or wrong
NOT_FOUND = "not found"
UNKNOWN = "unknown"  # present, but the value cannot be read from here (e.g. from a Secret)

ISVC_CONFIG = ("kserve", "inferenceservice-config")
KNATIVE_FEATURES = ("knative-serving", "config-features")
VOLCANO_SCHEDULER = ("volcano-system", "volcano-scheduler-configmap")
KUEUE_MANAGER = ("kueue-system", "kueue-manager-config")
DCGM_EXPORTER = ("gpu-operator", "nvidia-dcgm-exporter")
# The second exporter, for DRA nodes, when a profile has time-sliced and DRA offerings.
DCGM_DRA_EXPORTER = ("gpu-operator", "nvidia-dcgm-exporter-dra")
STORAGE_CONTAINER = "default"

DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"


@dataclass(frozen=True)
class Finding:
    source: str  # e.g. "ConfigMap kserve/inferenceservice-config"
    setting: str  # e.g. "deploy.defaultDeploymentMode"
    status: str  # OK | FIX | NOT_FOUND | UNKNOWN
    detail: str  # what was found and why it matters
    fix: str = ""

    @property
    def needs_attention(self) -> bool:
        return self.status != OK


@dataclass(frozen=True)
class Endpoint:
    """The InferenceService the portal would build for one offering."""

    offering: str
    annotations: Mapping[str, str]
    predictor: Mapping[str, Any]

    @property
    def uses_dra(self) -> bool:
        return bool(self.predictor.get("resourceClaims"))


@dataclass(frozen=True)
class PortalNeeds:
    """What the portal will ask of the cluster, from its cluster profile and builders."""

    queueing: str = "volcano"  # "volcano" | "kueue"
    shared_gpus: bool = False  # time-sliced (device-plugin sharing) offerings exist
    dra_device_classes: tuple[str, ...] = ()  # DeviceClasses of DRA offerings
    kueue_resources: tuple[str, ...] = ()  # resources the portal's Kueue ClusterQueues count
    endpoints: tuple[Endpoint, ...] = ()
    namespace_enforce: str = "restricted"  # Pod Security Standard enforced on team namespaces

    @property
    def dra(self) -> bool:
        return bool(self.dra_device_classes)


# -- what the portal asks of the cluster -------------------------------------------------


def portal_needs(profile: Any, namespace_prefix: str = "team-") -> PortalNeeds:
    """Build ``PortalNeeds`` with the portal's own (pure) builders, for every offering of ``profile``.

    ``profile`` is a ``portal.cluster_profile.ClusterProfile``. An endpoint is built per
    offering, as a user would request it (one unit, a KServe runtime model from object
    storage), so every pod-spec field the builders can set on a predictor is seen.
    """
    from jobs.kube.manifests import team_objects, workload_objects
    from jobs.specs import TeamRef, WorkloadSpec, endpoint_deployment_mode
    from quotas.kueue import kueue_resource

    team = TeamRef("preflight", f"{namespace_prefix}preflight")
    endpoints = []
    for slug, offering in sorted(profile.offerings.items()):
        spec = WorkloadSpec(
            id=0,
            kind="endpoint",
            name="preflight",
            team=team,
            offering=offering,
            gpus_per_replica=0 if offering.kind == "cpu" else 1,
            model_format="pytorch",
            storage_uri="s3://models/preflight",
            queueing=profile.queueing,
        )
        # The mode the portal names on each endpoint (the profile's; DRA endpoints Standard).
        mode = endpoint_deployment_mode(offering, spec.gpus_per_replica, profile.kserve_deployment_mode)
        spec = replace(spec, deployment_mode=mode)
        for obj in workload_objects(spec):
            if obj.get("kind") == "InferenceService":
                endpoints.append(
                    Endpoint(
                        offering=slug,
                        annotations=dict((obj.get("metadata") or {}).get("annotations") or {}),
                        predictor=obj["spec"]["predictor"],
                    )
                )
    namespace = next(o for o in team_objects(team, {}) if o.get("kind") == "Namespace")
    return PortalNeeds(
        queueing=profile.queueing,
        shared_gpus=any(o.kind == "shared" for o in profile.offerings.values()),
        dra_device_classes=tuple(
            sorted({o.dra_device_class for o in profile.offerings.values() if o.request_mode == "dra"})
        ),
        kueue_resources=tuple(sorted({r for o in profile.offerings.values() if (r := kueue_resource(o))})),
        endpoints=tuple(endpoints),
        namespace_enforce=namespace["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce", ""),
    )


# -- KServe --------------------------------------------------------------------------------

_MODES = {
    "serverless": "Knative",
    "knative": "Knative",
    "rawdeployment": "Standard",
    "standard": "Standard",
    "modelmesh": "ModelMesh",
}


def normalized_mode(value: str) -> str:
    """KServe's own normalisation: Serverless is Knative, RawDeployment is Standard."""
    return _MODES.get(value.strip().lower(), value.strip())


def _json_key(cm: Mapping[str, Any], key: str) -> tuple[dict[str, Any] | None, str]:
    raw = (cm.get("data") or {}).get(key)
    if raw is None:
        return None, f"has no {key!r} key"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"{key!r} is not JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"{key!r} is not a JSON object"
    return value, ""


def _cm_source(ref: tuple[str, str]) -> str:
    return f"ConfigMap {ref[0]}/{ref[1]}"


def not_found(source: str, what: str, fix: str) -> Finding:
    return Finding(source, "(object)", NOT_FOUND, f"not found: {what}", fix)


def effective_modes(needs: PortalNeeds, default_mode: str) -> dict[str, list[str]]:
    """Deployment mode -> offerings whose endpoints run in it (the annotation, else KServe's default)."""
    modes: dict[str, list[str]] = {}
    for endpoint in needs.endpoints:
        annotated = endpoint.annotations.get(DEPLOYMENT_MODE_ANNOTATION, "")
        modes.setdefault(normalized_mode(annotated or default_mode), []).append(endpoint.offering)
    return modes


def check_kserve(
    cm: Mapping[str, Any] | None,
    storage_container: Mapping[str, Any] | None,
    needs: PortalNeeds,
    namespace: str = ISVC_CONFIG[0],
) -> tuple[list[Finding], str]:
    """Findings for KServe's configuration, and its default deployment mode ("" when unknown)."""
    source = _cm_source((namespace, ISVC_CONFIG[1]))
    if cm is None:
        return [
            not_found(
                source,
                "KServe's controller configuration",
                f"is KServe installed? If in another namespace, pass --kserve-namespace (looked in {namespace!r})",
            )
        ], ""
    findings = []
    deploy, problem = _json_key(cm, "deploy")
    default_mode = normalized_mode(str((deploy or {}).get("defaultDeploymentMode", "")))
    if deploy is None or not default_mode:
        findings.append(
            Finding(
                source,
                "deploy.defaultDeploymentMode",
                FIX,
                f"cannot tell the default deployment mode: the ConfigMap {problem or 'sets no defaultDeploymentMode'}",
                'set data.deploy to {"defaultDeploymentMode": "Standard"} (or "Knative")',
            )
        )
        default_mode = ""
    else:
        modes = effective_modes(needs, default_mode)
        described = "; ".join(f"{mode}: {', '.join(offerings)}" for mode, offerings in sorted(modes.items()))
        findings.append(
            Finding(
                source,
                "deploy.defaultDeploymentMode",
                OK,
                f"{deploy['defaultDeploymentMode']} (endpoints run as {described or 'none'})",
            )
        )
        knative_dra = [e.offering for e in needs.endpoints if e.uses_dra and _mode_of(e, default_mode) == "Knative"]
        if knative_dra:
            findings.append(
                Finding(
                    source,
                    "deploy.defaultDeploymentMode",
                    FIX,
                    "endpoints on DRA offerings would run in Knative mode, which never allows resourceClaims: "
                    + ", ".join(knative_dra),
                    'set data.deploy to {"defaultDeploymentMode": "Standard"} or do not offer DRA offerings '
                    "for endpoints",
                )
            )
    findings.append(_storage_initializer(cm, storage_container, needs, source))
    return findings, default_mode


def _mode_of(endpoint: Endpoint, default_mode: str) -> str:
    return normalized_mode(endpoint.annotations.get(DEPLOYMENT_MODE_ANNOTATION, "") or default_mode)


RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def restricted_gaps(security_context: Mapping[str, Any] | None) -> list[str]:
    """What a container securityContext lacks for the restricted Pod Security Standard.

    The pod-level context the portal sets covers runAsNonRoot and seccompProfile for
    every container; a container must still drop ALL capabilities and forbid privilege
    escalation itself (these have no pod-level field).
    """
    sc = security_context or {}
    gaps = []
    if sc.get("allowPrivilegeEscalation") is not False:
        gaps.append("allowPrivilegeEscalation: false")
    drop = [str(c).upper() for c in ((sc.get("capabilities") or {}).get("drop") or [])]
    if "ALL" not in drop:
        gaps.append("capabilities.drop: [ALL]")
    if sc.get("privileged"):
        gaps.append("privileged must not be true")
    return gaps


def _storage_initializer(
    cm: Mapping[str, Any], storage_container: Mapping[str, Any] | None, needs: PortalNeeds, source: str
) -> Finding:
    init, problem = _json_key(cm, "storageInitializer")
    setting = "storageInitializer (securityContext)"
    if init is None:
        return Finding(source, setting, FIX, f"the ConfigMap {problem}", "restore KServe's storageInitializer entry")
    if needs.namespace_enforce != "restricted":
        return Finding(
            source,
            setting,
            OK,
            f"team namespaces enforce {needs.namespace_enforce or 'no'} Pod Security Standard; "
            "KServe's storage-initializer is admitted as it is",
        )
    container = ((storage_container or {}).get("spec") or {}).get("container") or {}
    gaps = restricted_gaps(container.get("securityContext"))
    if storage_container is not None and not gaps:
        return Finding(
            source,
            setting,
            OK,
            f"ClusterStorageContainer {STORAGE_CONTAINER!r} gives the storage-initializer a restricted securityContext",
        )
    seen = (
        f"ClusterStorageContainer {STORAGE_CONTAINER!r} lacks {', '.join(gaps)}"
        if storage_container is not None
        else f"no ClusterStorageContainer {STORAGE_CONTAINER!r} could be read"
    )
    return Finding(
        source,
        setting,
        FIX,
        "KServe injects the storage-initializer init container into model pods without a securityContext "
        f"(its image {init.get('image', '?')!r} comes from here), and team namespaces enforce the restricted "
        f"Pod Security Standard, so model pods with a storageUri are rejected; {seen}",
        f"give ClusterStorageContainer {STORAGE_CONTAINER!r} spec.container.securityContext: "
        "{allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, runAsNonRoot: true, "
        "seccompProfile: {type: RuntimeDefault}}",
    )


# -- Knative Serving -------------------------------------------------------------------------

# Pod-spec fields and the config-features flag that allows each in a Knative pod template
# (knative-v1.21.1, podspec-fieldmask.csv): field -> (flag, upstream default, needs
# exactly "enabled" rather than "enabled" or "allowed").
KNATIVE_POD_FLAGS: dict[str, tuple[str, str, bool]] = {
    "initContainers": ("kubernetes.podspec-init-containers", "disabled", True),
    "dnsPolicy": ("kubernetes.podspec-dnspolicy", "disabled", False),
    "nodeSelector": ("kubernetes.podspec-nodeselector", "disabled", False),
    "hostNetwork": ("kubernetes.podspec-hostnetwork", "disabled", False),
    "hostPID": ("kubernetes.podspec-hostpid", "disabled", False),
    "hostIPC": ("kubernetes.podspec-hostipc", "disabled", False),
    "shareProcessNamespace": ("kubernetes.podspec-shareprocessnamespace", "disabled", False),
    "securityContext": ("kubernetes.podspec-securitycontext", "disabled", False),
    "affinity": ("kubernetes.podspec-affinity", "disabled", False),
    "schedulerName": ("kubernetes.podspec-schedulername", "disabled", False),
    "tolerations": ("kubernetes.podspec-tolerations", "disabled", False),
    "hostAliases": ("kubernetes.podspec-hostaliases", "disabled", False),
    "priorityClassName": ("kubernetes.podspec-priorityclassname", "disabled", False),
    "dnsConfig": ("kubernetes.podspec-dnsconfig", "disabled", False),
    "runtimeClassName": ("kubernetes.podspec-runtimeclassname", "disabled", False),
    "topologySpreadConstraints": ("kubernetes.podspec-topologyspreadconstraints", "disabled", False),
}
KNATIVE_FIELDREF = ("kubernetes.podspec-fieldref", "disabled", False)
KNATIVE_VOLUME_FLAGS: dict[str, tuple[str, str, bool]] = {
    "emptyDir": ("kubernetes.podspec-volumes-emptydir", "enabled", True),
    "persistentVolumeClaim": ("kubernetes.podspec-persistent-volume-claim", "disabled", True),
    "hostPath": ("kubernetes.podspec-volumes-hostpath", "disabled", True),
    "csi": ("kubernetes.podspec-volumes-csi", "disabled", True),
}
# Never allowed in a Knative pod template, whatever the flags say.
KNATIVE_NEVER = (
    "ephemeralContainers",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "serviceAccount",
    "nodeName",
    "hostname",
    "subdomain",
    "priority",
    "readinessGates",
    "preemptionPolicy",
    "overhead",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
    "resources",
    "hostnameOverride",
)
KNATIVE_NEVER_POD_SECURITY = (
    "supplementalGroupsPolicy",
    "seLinuxOptions",
    "windowsOptions",
    "sysctls",
    "fsGroupChangePolicy",
    "appArmorProfile",
    "seLinuxChangePolicy",
)


@dataclass
class KnativeNeeds:
    flags: dict[str, set[str]] = field(default_factory=dict)  # flag -> fields needing it
    never: set[str] = field(default_factory=set)  # fields Knative always refuses
    exact: set[str] = field(default_factory=set)  # flags that must be exactly "enabled"
    defaults: dict[str, str] = field(default_factory=dict)


def knative_needs(predictor: Mapping[str, Any]) -> KnativeNeeds:
    """The config-features flags (and never-allowed fields) a KServe predictor's pod spec needs."""
    needs = KnativeNeeds()

    def need(flag: tuple[str, str, bool], what: str) -> None:
        name, default, exact = flag
        needs.flags.setdefault(name, set()).add(what)
        needs.defaults[name] = default
        if exact:
            needs.exact.add(name)

    for key, flag in KNATIVE_POD_FLAGS.items():
        if predictor.get(key) not in (None, [], {}, ""):
            need(flag, key)
    for key in KNATIVE_NEVER:
        if predictor.get(key) not in (None, [], {}):
            needs.never.add(key)
    if predictor.get("automountServiceAccountToken") is True:
        needs.never.add("automountServiceAccountToken: true")
    for key in KNATIVE_NEVER_POD_SECURITY:
        if key in (predictor.get("securityContext") or {}):
            needs.never.add(f"securityContext.{key}")
    for volume in predictor.get("volumes") or []:
        for source, flag in KNATIVE_VOLUME_FLAGS.items():
            if source in volume:
                need(flag, f"volumes[].{source}")
    containers = list(predictor.get("containers") or [])
    if isinstance(predictor.get("model"), Mapping):
        containers.append(predictor["model"])
    for container in containers:
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}) if isinstance(env, Mapping) else {}
            if "fieldRef" in ref or "resourceFieldRef" in ref:
                need(KNATIVE_FIELDREF, f"env {env.get('name')} valueFrom")
    return needs


def flag_allows(value: str, exact: bool) -> bool:
    value = value.strip().lower()
    return value == "enabled" or (value == "allowed" and not exact)


def check_knative(
    cm: Mapping[str, Any] | None, needs: PortalNeeds, default_mode: str, namespace: str = KNATIVE_FEATURES[0]
) -> list[Finding]:
    source = _cm_source((namespace, KNATIVE_FEATURES[1]))
    knative = [e for e in needs.endpoints if _mode_of(e, default_mode) == "Knative"]
    if not knative:
        reason = (
            "KServe's default deployment mode is unknown" if not default_mode else "no endpoint runs in Knative mode"
        )
        status = UNKNOWN if not default_mode else OK
        return [Finding(source, "(feature flags)", status, f"not checked: {reason}")]
    if cm is None:
        return [
            not_found(
                source,
                "Knative Serving's feature flags, and endpoints run in Knative mode",
                "install Knative Serving, or run endpoints in Standard mode "
                f"(KServe deploy.defaultDeploymentMode); looked in {namespace!r}",
            )
        ]
    data = cm.get("data") or {}
    wanted: dict[str, dict[str, set[str]]] = {}  # flag -> field -> offerings
    exact: set[str] = set()
    defaults: dict[str, str] = {}
    never: dict[str, set[str]] = {}
    for endpoint in knative:
        n = knative_needs(endpoint.predictor)
        exact |= n.exact
        defaults.update(n.defaults)
        for flag, fields in n.flags.items():
            for f in fields:
                wanted.setdefault(flag, {}).setdefault(f, set()).add(endpoint.offering)
        for f in n.never:
            never.setdefault(f, set()).add(endpoint.offering)
    findings = []
    for flag in sorted(wanted):
        value = str(data.get(flag, defaults[flag]))
        shown = f"{value!r}" + ("" if flag in data else " (upstream default)")
        fields = ", ".join(sorted(wanted[flag]))
        if flag_allows(value, flag in exact):
            findings.append(Finding(source, flag, OK, f"{shown}; endpoints set {fields}"))
        else:
            needed = "enabled" if flag in exact else "enabled (or allowed)"
            offerings = sorted(set().union(*wanted[flag].values()))
            findings.append(
                Finding(
                    source,
                    flag,
                    FIX,
                    f"{shown}, but endpoints set {fields} ({', '.join(offerings)}): Knative rejects them",
                    f"kubectl -n {namespace} patch configmap {KNATIVE_FEATURES[1]} --type merge "
                    f'-p \'{{"data":{{"{flag}":"enabled"}}}}\'  ({needed})',
                )
            )
    for f in sorted(never):
        findings.append(
            Finding(
                source,
                f,
                FIX,
                f"endpoints on {', '.join(sorted(never[f]))} set {f}, which Knative never allows",
                "run these endpoints in Standard mode (KServe deploy.defaultDeploymentMode or the "
                f"{DEPLOYMENT_MODE_ANNOTATION} annotation)",
            )
        )
    return findings


# -- Volcano -------------------------------------------------------------------------------

# What the portal needs is what portal/scheduler_config.py renders (the README prints it and
# the sandbox runs it), so the actions and plugins checked come from there; the texts say
# why the portal needs each. A test fails when scheduler_config gains one without a why
# (an empty why here, rather than an import error that would stop the portal).
_VOLCANO_ACTION_WHY = {
    "enqueue": "admits jobs into their queue (without it nothing leaves Pending)",
    "allocate": "places pods on nodes",
    "preempt": "lets a team's guaranteed work evict its own preemptible burst work in the same queue",
    "reclaim": "takes GPUs a team borrowed above its deserved back for a team within its guarantee "
    "(preempt acts only inside one queue; Volcano's shipped default has no reclaim)",
    "backfill": "places pods that request no resources, which allocate skips",
}
VOLCANO_ACTIONS = {a: _VOLCANO_ACTION_WHY.get(a, "") for a in scheduler_config.VOLCANO_ACTIONS}

# Plugins that read what the portal sets. The rest of scheduler_config's tiers (conformance,
# drf, nodeorder, binpack) are upstream's defaults that place work well but that the portal
# does not depend on, so their absence is not a finding.
_VOLCANO_PLUGIN_WHY = {
    "gang": "training runs start all their pods or none (minAvailable)",
    "priority": "the portal's priority classes order jobs and pick preemption and reclaim victims",
    "predicates": "node selectors, tolerations and GPU resources are honoured",
}
VOLCANO_PLUGINS = {
    name: _VOLCANO_PLUGIN_WHY[name]
    for tier in scheduler_config.VOLCANO_TIERS
    for name in (p["name"] for p in tier)
    if name in _VOLCANO_PLUGIN_WHY
}
# The queue plugin the portal's Queues are written for, and the one upstream ships instead.
VOLCANO_QUEUE_PLUGIN = "capacity"
VOLCANO_WRONG_QUEUE_PLUGIN = "proportion"
VOLCANO_DRA_ARGUMENT = "predicate.DynamicResourceAllocationEnable"
VOLCANO_CONF_KEY = scheduler_config.VOLCANO_CONF_KEY
_PROPORTION_IGNORES_DESERVED = (
    "proportion never reads Queue.spec.deserved, the team's guarantee and (with capability) all the portal's "
    "Queues carry: it splits the cluster by weight, so every team gets an equal share whatever its guarantee "
    "and reclaim returns nothing to a team owed its GPUs"
)


def parse_volcano_conf(text: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(actions, plugin name -> arguments) of a volcano-scheduler.conf."""
    conf = yaml.safe_load(text) or {}
    if not isinstance(conf, dict):
        raise ValueError("not a YAML mapping")
    actions = [a.strip() for a in str(conf.get("actions", "")).split(",") if a.strip()]
    plugins: dict[str, dict[str, Any]] = {}
    for tier in conf.get("tiers") or []:
        for plugin in (tier or {}).get("plugins") or []:
            if isinstance(plugin, dict) and plugin.get("name"):
                plugins[str(plugin["name"])] = dict(plugin.get("arguments") or {})
    return actions, plugins


def check_volcano(
    cm: Mapping[str, Any] | None, needs: PortalNeeds, namespace: str = VOLCANO_SCHEDULER[0]
) -> list[Finding]:
    source = _cm_source((namespace, VOLCANO_SCHEDULER[1]))
    if needs.queueing != "volcano":
        return [Finding(source, "(scheduler)", OK, f"not checked: the cluster profile queues with {needs.queueing}")]
    fix_conf = f"kubectl -n {namespace} edit configmap {VOLCANO_SCHEDULER[1]}  (key {VOLCANO_CONF_KEY})"
    if cm is None:
        return [
            not_found(
                source,
                "Volcano's scheduler configuration; without it the scheduler runs its built-in default, "
                "which has no reclaim action and uses proportion",
                f"install Volcano, or pass --volcano-namespace (looked in {namespace!r})",
            )
        ]
    raw = (cm.get("data") or {}).get(VOLCANO_CONF_KEY)
    if raw is None:
        return [Finding(source, VOLCANO_CONF_KEY, FIX, f"the ConfigMap has no {VOLCANO_CONF_KEY!r} key", fix_conf)]
    try:
        actions, plugins = parse_volcano_conf(raw)
    except (yaml.YAMLError, ValueError) as exc:
        return [Finding(source, VOLCANO_CONF_KEY, FIX, f"not valid scheduler YAML: {exc}", fix_conf)]
    findings = []
    missing = [a for a in VOLCANO_ACTIONS if a not in actions]
    if missing:
        findings.append(
            Finding(
                source,
                "actions",
                FIX,
                f"{', '.join(actions) or 'none'}; missing " + "; ".join(f"{a} ({VOLCANO_ACTIONS[a]})" for a in missing),
                f'{fix_conf}: actions: "{", ".join(_with_actions(actions, missing))}"',
            )
        )
    else:
        findings.append(Finding(source, "actions", OK, ", ".join(actions)))
    for name, why in VOLCANO_PLUGINS.items():
        if name in plugins:
            findings.append(Finding(source, f"plugin {name}", OK, why))
        else:
            findings.append(Finding(source, f"plugin {name}", FIX, f"not enabled: {why}", f"{fix_conf}: add it"))
    findings.append(_volcano_queue_plugin(plugins, source, fix_conf))
    if needs.dra:
        enabled = str((plugins.get("predicates") or {}).get(VOLCANO_DRA_ARGUMENT, "")).lower() == "true"
        findings.append(
            Finding(
                source,
                f"predicates.{VOLCANO_DRA_ARGUMENT}",
                OK if enabled else FIX,
                "DRA offerings need Volcano to allocate ResourceClaims"
                + ("" if enabled else ": not enabled, so their pods never schedule"),
                "" if enabled else f"{fix_conf}: predicates arguments {{{VOLCANO_DRA_ARGUMENT}: true}}",
            )
        )
    return findings


def _volcano_queue_plugin(plugins: Mapping[str, Any], source: str, fix_conf: str) -> Finding:
    right, wrong = VOLCANO_QUEUE_PLUGIN in plugins, VOLCANO_WRONG_QUEUE_PLUGIN in plugins
    setting = "queue plugin"
    if right and not wrong:
        return Finding(
            source, setting, OK, "capacity enforces each team queue's deserved (reclaimed for it) and capability"
        )
    if right and wrong:
        return Finding(
            source,
            setting,
            FIX,
            "both capacity and proportion are enabled: Volcano supports one queue plugin, and proportion's "
            "weight-based shares and enqueue checks would bound the teams' queues as well as capacity's "
            f"(and {_PROPORTION_IGNORES_DESERVED})",
            f"{fix_conf}: remove proportion (keep capacity)",
        )
    if wrong:
        fix = f"{fix_conf}: replace proportion with capacity"
        return Finding(source, setting, FIX, _PROPORTION_IGNORES_DESERVED, fix)
    return Finding(
        source,
        setting,
        FIX,
        "neither capacity nor proportion is enabled: team queues' deserved and capability are not enforced",
        f"{fix_conf}: add capacity",
    )


def _with_actions(actions: Sequence[str], missing: Iterable[str]) -> list[str]:
    """The portal's order (portal/scheduler_config.py), other actions after it: Volcano runs
    the actions in the order listed."""
    order = list(scheduler_config.VOLCANO_ACTIONS)
    merged = list(dict.fromkeys([*actions, *missing]))
    return sorted(merged, key=lambda a: order.index(a) if a in order else len(order))


# -- Kueue ---------------------------------------------------------------------------------

KUEUE_CONF_KEY = scheduler_config.KUEUE_CONF_KEY
# Why the portal needs each integration of portal/scheduler_config.py's KUEUE_FRAMEWORKS (a
# test fails when it gains one without a why); statefulset only matters with DRA offerings.
_KUEUE_FRAMEWORK_WHY = {
    "trainer.kubeflow.org/trainjob": "torch training runs as TrainJobs",
    "jobset.x-k8s.io/jobset": "other training runs as JobSets",
    "pod": "notebook and endpoint pods are queued one by one",
    "statefulset": "notebooks on DRA offerings run as StatefulSets",
}
KUEUE_DRA_ONLY_FRAMEWORKS = ("statefulset",)
KUEUE_FRAMEWORKS = {f: _KUEUE_FRAMEWORK_WHY.get(f, "") for f in scheduler_config.KUEUE_FRAMEWORKS}


def check_kueue(cm: Mapping[str, Any] | None, needs: PortalNeeds, namespace: str = KUEUE_MANAGER[0]) -> list[Finding]:
    source = _cm_source((namespace, KUEUE_MANAGER[1]))
    if needs.queueing != "kueue":
        return [
            Finding(source, "(configuration)", OK, f"not checked: the cluster profile queues with {needs.queueing}")
        ]
    fix_conf = f"kubectl -n {namespace} edit configmap {KUEUE_MANAGER[1]}  (key {KUEUE_CONF_KEY}), then restart Kueue"
    if cm is None:
        return [
            not_found(
                source, "Kueue's configuration", f"install Kueue, or pass --kueue-namespace (looked in {namespace!r})"
            )
        ]
    raw = (cm.get("data") or {}).get(KUEUE_CONF_KEY)
    if raw is None:
        return [Finding(source, KUEUE_CONF_KEY, FIX, f"the ConfigMap has no {KUEUE_CONF_KEY!r} key", fix_conf)]
    try:
        conf = yaml.safe_load(raw) or {}
        if not isinstance(conf, dict):
            raise ValueError("not a YAML mapping")
    except (yaml.YAMLError, ValueError) as exc:
        return [Finding(source, KUEUE_CONF_KEY, FIX, f"not a valid Configuration: {exc}", fix_conf)]
    findings = []
    integrations = conf.get("integrations") or {}
    frameworks = set(integrations.get("frameworks") or [])
    for name, why in KUEUE_FRAMEWORKS.items():
        if name in KUEUE_DRA_ONLY_FRAMEWORKS and not needs.dra:
            continue
        ok = name in frameworks
        findings.append(
            Finding(
                source,
                f"integrations.frameworks {name}",
                OK if ok else FIX,
                why if ok else f"not enabled, but {why}",
                "" if ok else f"{fix_conf}: add {name!r} to integrations.frameworks",
            )
        )
    copied = set(integrations.get("labelKeysToCopy") or [])
    uncopied = [k for k in scheduler_config.KUEUE_LABEL_KEYS_TO_COPY if k not in copied]
    findings.append(
        Finding(
            source,
            "integrations.labelKeysToCopy",
            FIX if uncopied else OK,
            (
                f"missing {', '.join(uncopied)}: Kueue's Workloads would not carry the portal's labels, and the "
                "portal finds them by those labels to tell why admitted or queued work has not started"
                if uncopied
                else "Workloads carry the portal's labels"
            ),
            f"{fix_conf}: add {', '.join(uncopied)} to integrations.labelKeysToCopy" if uncopied else "",
        )
    )
    findings.extend(_kueue_excluded(conf, needs, source, fix_conf))
    if needs.dra:
        findings.extend(_kueue_dra(conf, needs, source, fix_conf))
    return findings


def _kueue_excluded(conf: Mapping[str, Any], needs: PortalNeeds, source: str, fix_conf: str) -> list[Finding]:
    """``resources.excludeResourcePrefixes``: Kueue ignores a request whose name starts with one.

    The portal's ClusterQueues cover GPUs only, so cpu and memory must be excluded (or every
    workload asks for a resource its queue does not cover and is never admitted), and no
    GPU resource the ClusterQueues count may be (its quota would not be enforced).
    """
    prefixes = [str(p) for p in ((conf.get("resources") or {}).get("excludeResourcePrefixes") or [])]
    setting = "resources.excludeResourcePrefixes"

    def excluded(resource: str) -> bool:
        return any(resource.startswith(p) for p in prefixes)

    fix = f"{fix_conf}: resources.excludeResourcePrefixes: [{', '.join(scheduler_config.KUEUE_EXCLUDED_PREFIXES)}]"
    findings = []
    counted = [r for r in scheduler_config.KUEUE_EXCLUDED_PREFIXES if not excluded(r)]
    if counted:
        findings.append(
            Finding(
                source,
                setting,
                FIX,
                f"{prefixes or 'none'}: Kueue counts {' and '.join(counted)}, which the portal's ClusterQueues do "
                "not cover (they hold GPUs only), so no workload is ever admitted",
                fix,
            )
        )
    gpus = [r for r in needs.kueue_resources if excluded(r)]
    if gpus:
        findings.append(
            Finding(
                source,
                setting,
                FIX,
                f"{prefixes} excludes {', '.join(gpus)}, which the portal's ClusterQueues count: the teams' GPU "
                "quotas would not be enforced",
                fix,
            )
        )
    if not findings:
        findings.append(Finding(source, setting, OK, f"{prefixes}: Kueue counts GPUs only, as the ClusterQueues do"))
    return findings


def _kueue_dra(conf: Mapping[str, Any], needs: PortalNeeds, source: str, fix_conf: str) -> list[Finding]:
    gates = conf.get("featureGates") or {}
    findings = []
    if gates.get("KueueDRAIntegration") is False:
        findings.append(
            Finding(
                source,
                "featureGates.KueueDRAIntegration",
                FIX,
                "turned off: Kueue marks every workload using DRA inadmissible",
                f"{fix_conf}: remove KueueDRAIntegration: false",
            )
        )
    mappings = ((conf.get("resources") or {}).get("deviceClassMappings")) or []
    counted_as = {
        str(c): str(m.get("name", ""))
        for m in mappings
        if isinstance(m, Mapping)
        for c in (m.get("deviceClassNames") or [])
    }
    for device_class in needs.dra_device_classes:
        setting = f"resources.deviceClassMappings {device_class}"
        wanted = scheduler_config.dra_resource_name(device_class)
        fix = f"{fix_conf}: resources.deviceClassMappings: [{{name: {wanted}, deviceClassNames: [{device_class}]}}]"
        if device_class not in counted_as:
            findings.append(
                Finding(
                    source,
                    setting,
                    FIX,
                    f"DeviceClass {device_class} of the profile's DRA offerings is not mapped: Kueue marks their "
                    'workloads inadmissible ("DeviceClass ... is not mapped in DRA configuration")',
                    fix,
                )
            )
        elif counted_as[device_class] != wanted:
            findings.append(
                Finding(
                    source,
                    setting,
                    FIX,
                    f"mapped to {counted_as[device_class]!r}, but the portal's ClusterQueues count the class's "
                    f"devices as {wanted!r}: its workloads are charged to another resource's quota, or are never "
                    "admitted where no ClusterQueue covers that resource",
                    fix,
                )
            )
        else:
            findings.append(Finding(source, setting, OK, f"mapped to {wanted}, which the ClusterQueues cover"))
    return findings


# -- dcgm-exporter -------------------------------------------------------------------------

DCGM_SETTINGS = {
    "DCGM_EXPORTER_KUBERNETES": ("--kubernetes", "GPU metrics carry the pod using each GPU (usage, spend, idle)"),
    "KUBERNETES_VIRTUAL_GPUS": (
        "--kubernetes-virtual-gpus",
        "time-sliced GPUs are attributed to the pods sharing them",
    ),
    "KUBERNETES_ENABLE_DRA": ("--kubernetes-enable-dra", "GPUs allocated through DRA are attributed to their pods"),
}
# Upstream's PodMapper.Process handles virtual GPUs and returns before its DRA pass, so an
# exporter with KUBERNETES_VIRTUAL_GPUS=true never labels a DRA-allocated GPU with its pod.
_VIRTUAL_SKIPS_DRA = (
    "dcgm-exporter's virtual-GPU branch returns before its DRA step, so an exporter with "
    "KUBERNETES_VIRTUAL_GPUS=true never attributes DRA-allocated GPUs to their pods"
)
_GO_TRUE = {"1", "t", "true"}
_GO_FALSE = {"0", "f", "false"}


def _container_setting(container: Mapping[str, Any], env_name: str, flag: str) -> bool | None:
    """The boolean a dcgm-exporter container gets from its args or env; None when it cannot be read.

    urfave/cli: a flag given on the command line wins over its environment variable;
    values parse as Go's strconv.ParseBool.
    """
    for arg in [*(container.get("command") or []), *(container.get("args") or [])]:
        arg = str(arg)
        if arg == flag:
            return True
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1].strip().lower() in _GO_TRUE
    for env in container.get("env") or []:
        if env.get("name") == env_name:
            if "value" not in env:
                return None  # from a ConfigMap/Secret reference: not visible here
            value = str(env["value"]).strip().lower()
            return value in _GO_TRUE if value in _GO_TRUE | _GO_FALSE else False
    return False  # the binary's default is false for all three


def _pod_spec(daemonset: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}


def _exporter_container(daemonset: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = _pod_spec(daemonset).get("containers") or []
    return next((c for c in containers if "dcgm" in str(c.get("name", ""))), containers[0] if containers else {})


def _exporter_findings(daemonset: Mapping[str, Any], source: str, wanted: Mapping[str, bool]) -> list[Finding]:
    """One finding per setting: ``wanted`` maps each env name to the value the portal needs."""
    container = _exporter_container(daemonset)
    fix_where = "set it in the GPU Operator's ClusterPolicy (spec.dcgmExporter.env) or the DaemonSet's container env: "
    findings = []
    for name, want in wanted.items():
        flag, why = DCGM_SETTINGS[name]
        value = _container_setting(container, name, flag)
        needed = f"needs {str(want).lower()}: " + (why if want else _VIRTUAL_SKIPS_DRA)
        if value is None:
            findings.append(Finding(source, name, UNKNOWN, f"comes from a reference this check cannot read; {needed}"))
        elif value is want:
            detail = f"true: {why}" if want else f"false, as DRA attribution needs ({_VIRTUAL_SKIPS_DRA})"
            findings.append(Finding(source, name, OK, detail))
        elif want:
            findings.append(
                Finding(
                    source, name, FIX, f"not true (upstream default false), but {needed}", f"{fix_where}{name}=true"
                )
            )
        else:
            findings.append(
                Finding(
                    source,
                    name,
                    FIX,
                    f"true, but this exporter attributes DRA GPUs: {_VIRTUAL_SKIPS_DRA}",
                    f"{fix_where}{name}=false",
                )
            )
    return findings


def check_dcgm_exporter(
    daemonset: Mapping[str, Any] | None,
    needs: PortalNeeds,
    ref: tuple[str, str] = DCGM_EXPORTER,
    dra_daemonset: Mapping[str, Any] | None = None,
    dra_ref: tuple[str, str] = DCGM_DRA_EXPORTER,
) -> list[Finding]:
    """The exporter(s) the profile's offerings need.

    Time-sliced GPUs need ``KUBERNETES_VIRTUAL_GPUS=true`` and DRA GPUs need it false (see
    ``_VIRTUAL_SKIPS_DRA``), so a profile with both needs two exporters, as the sandbox's
    recommended setup has (``sandbox/gpu_operator.py``): ``ref`` for the device-plugin nodes
    and ``dra_ref`` (``KUBERNETES_ENABLE_DRA=true``, virtual GPUs off) for the DRA nodes.
    With only one kind, the one exporter ``ref`` is configured for it.
    """
    source = f"DaemonSet {ref[0]}/{ref[1]}"
    two = needs.shared_gpus and needs.dra
    findings = []
    if daemonset is None:
        findings.append(
            not_found(
                source,
                "dcgm-exporter (GPU metrics for usage and spend)",
                "install the GPU Operator with dcgm-exporter, or pass --dcgm-exporter NAMESPACE/NAME",
            )
        )
    else:
        wanted = {"DCGM_EXPORTER_KUBERNETES": True}
        if needs.shared_gpus:
            wanted["KUBERNETES_VIRTUAL_GPUS"] = True
        elif needs.dra:
            wanted["KUBERNETES_ENABLE_DRA"] = True
            wanted["KUBERNETES_VIRTUAL_GPUS"] = False
        findings += _exporter_findings(daemonset, source, wanted)
    if two:
        findings += _dra_exporter(daemonset, dra_daemonset, ref, dra_ref)
    return findings


def _dra_exporter(
    daemonset: Mapping[str, Any] | None,
    dra_daemonset: Mapping[str, Any] | None,
    ref: tuple[str, str],
    dra_ref: tuple[str, str],
) -> list[Finding]:
    source = f"DaemonSet {dra_ref[0]}/{dra_ref[1]}"
    if dra_daemonset is None:
        return [
            not_found(
                source,
                "a second dcgm-exporter for the DRA nodes. The profile has time-sliced and DRA offerings, and one "
                f"exporter cannot attribute both: {_VIRTUAL_SKIPS_DRA}, while without it shared GPUs carry no pod",
                f"run a second dcgm-exporter DaemonSet {dra_ref[1]} on the DRA nodes with "
                "DCGM_EXPORTER_KUBERNETES=true, "
                f"KUBERNETES_ENABLE_DRA=true, KUBERNETES_VIRTUAL_GPUS=false, keep {ref[1]} off those nodes, "
                "or pass --dcgm-exporter-dra NAMESPACE/NAME",
            )
        ]
    wanted = {"DCGM_EXPORTER_KUBERNETES": True, "KUBERNETES_ENABLE_DRA": True, "KUBERNETES_VIRTUAL_GPUS": False}
    findings = _exporter_findings(dra_daemonset, source, wanted)
    if daemonset is not None:
        findings.append(_exporters_apart(daemonset, dra_daemonset, ref, source))
    return findings


def _exporters_apart(
    daemonset: Mapping[str, Any], dra_daemonset: Mapping[str, Any], ref: tuple[str, str], source: str
) -> Finding:
    """Does a label the DRA exporter selects its nodes by keep the other exporter off them?

    On a node both run on, its GPUs are exported twice, once without their DRA pods.
    """
    selector = dict(_pod_spec(dra_daemonset).get("nodeSelector") or {})
    setting = "nodes"
    if not selector:
        return Finding(
            source,
            setting,
            FIX,
            "no nodeSelector: it runs on every node its tolerations admit, shared-GPU nodes too, where its "
            "virtual-GPU setting is off and those GPUs carry no pod",
            "select the DRA nodes by a label (e.g. nodeSelector {nvidia.com/dra-driver-gpu: 'true'})",
        )
    other = _pod_spec(daemonset)
    if any(_keeps_off(other, key, value) for key, value in selector.items()):
        return Finding(source, setting, OK, f"runs on nodes {selector}, which {ref[1]} stays off")
    # Suggest a label the other exporter does not itself require (GPU-node labels both share).
    shared = other.get("nodeSelector") or {}
    distinct = [(k, v) for k, v in selector.items() if str(shared.get(k)) != str(v)]
    key, value = (distinct or list(selector.items()))[0]
    return Finding(
        source,
        setting,
        FIX,
        f"runs on nodes {selector}, and nothing keeps {ref[1]} off them: their GPUs would be exported twice, "
        "once without their DRA pods",
        f"give {ref[1]} a required node affinity {{key: {key}, operator: DoesNotExist}} (or NotIn [{value}])",
    )


def _keeps_off(pod_spec: Mapping[str, Any], key: str, value: str) -> bool:
    """True when no node labelled ``key=value`` can satisfy the pod spec's node constraints."""
    node_selector = pod_spec.get("nodeSelector") or {}
    if key in node_selector and str(node_selector[key]) != str(value):
        return True
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = [t for t in required.get("nodeSelectorTerms") or [] if t.get("matchExpressions") or t.get("matchFields")]
    if not terms:
        return False

    def excludes(expression: Mapping[str, Any]) -> bool:
        if expression.get("key") != key:
            return False
        values = [str(v) for v in expression.get("values") or []]
        operator = expression.get("operator")
        return (
            operator == "DoesNotExist"
            or (operator == "NotIn" and str(value) in values)
            or (operator == "In" and str(value) not in values)
        )

    # Terms are ORed, expressions within a term ANDed: every term must exclude the label.
    return all(any(excludes(e) for e in term.get("matchExpressions") or []) for term in terms)


def check_all(
    objects: Mapping[str, Mapping[str, Any] | None],
    needs: PortalNeeds,
    refs: Mapping[str, Any],
    unreadable: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Every check, in order.

    ``objects``, ``refs`` and ``unreadable`` are keyed "kserve", "storage", "knative",
    "volcano", "kueue", "dcgm" and "dcgm_dra": the fetched object (None: not found), where
    it was looked for (a namespace; for the dcgm-exporters a (namespace, name) pair;
    "dcgm_dra" may be left out for the default), and for objects that could not be read
    (e.g. 403) the reason, reported instead of that object's check.
    """
    unreadable = unreadable or {}
    dra_ref = tuple(refs.get("dcgm_dra") or DCGM_DRA_EXPORTER)
    sources = {
        "kserve": _cm_source((refs["kserve"], ISVC_CONFIG[1])),
        "knative": _cm_source((refs["knative"], KNATIVE_FEATURES[1])),
        "volcano": _cm_source((refs["volcano"], VOLCANO_SCHEDULER[1])),
        "kueue": _cm_source((refs["kueue"], KUEUE_MANAGER[1])),
        "dcgm": f"DaemonSet {refs['dcgm'][0]}/{refs['dcgm'][1]}",
        "dcgm_dra": f"DaemonSet {dra_ref[0]}/{dra_ref[1]}",
        "storage": f"ClusterStorageContainer {STORAGE_CONTAINER}",
    }

    def cannot_read(key: str) -> list[Finding]:
        return [Finding(sources[key], "(object)", UNKNOWN, f"cannot read it: {unreadable[key]}")]

    findings: list[Finding] = []
    default_mode = ""
    if "kserve" in unreadable:
        findings += cannot_read("kserve")
    else:
        storage = None if "storage" in unreadable else objects.get("storage")
        kserve, default_mode = check_kserve(objects.get("kserve"), storage, needs, refs["kserve"])
        findings += kserve
    for key, check in (("knative", None), ("volcano", check_volcano), ("kueue", check_kueue)):
        if key in unreadable:
            findings += cannot_read(key)
        elif check is None:
            findings += check_knative(objects.get(key), needs, default_mode, refs[key])
        else:
            findings += check(objects.get(key), needs, refs[key])
    dcgm = check_dcgm_exporter(
        None if "dcgm" in unreadable else objects.get("dcgm"),
        needs,
        tuple(refs["dcgm"]),
        None if "dcgm_dra" in unreadable else objects.get("dcgm_dra"),
        dra_ref,
    )
    # An unreadable exporter is reported as such, not as missing.
    for key in ("dcgm", "dcgm_dra"):
        if key in unreadable:
            dcgm = [f for f in dcgm if f.source != sources[key]]
            if key == "dcgm" or (needs.shared_gpus and needs.dra):
                dcgm += cannot_read(key)
    findings += sorted(dcgm, key=lambda f: f.source != sources["dcgm"])
    return findings


__all__ = [
    "FIX",
    "NOT_FOUND",
    "OK",
    "UNKNOWN",
    "Endpoint",
    "Finding",
    "PortalNeeds",
    "check_all",
    "check_dcgm_exporter",
    "check_knative",
    "check_kserve",
    "check_kueue",
    "check_volcano",
    "knative_needs",
    "portal_needs",
]
