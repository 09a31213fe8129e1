"""jobs/preflight.py: the add-on settings the portal needs, checked against upstream default
configuration files (from ../shared/reference) and objects built here."""

from __future__ import annotations

import copy
from dataclasses import replace
from types import SimpleNamespace

import pytest
import yaml

from jobs import preflight
from jobs.preflight import FIX, NOT_FOUND, OK, UNKNOWN, PortalNeeds
from portal import scheduler_config
from portal.cluster_profile import load_profile
from sandbox import gpu_operator
from tests.conftest import DEMO_PROFILE, REPO_ROOT, SHARED_REFERENCE

KUEUE_PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo-kueue.yaml"


def reference(path: str):
    source = SHARED_REFERENCE / path
    if not source.is_file():
        pytest.skip(f"upstream reference {source} (../shared/reference from the repo root) is not present")
    return source


def upstream_configmap(path: str) -> dict:
    return next(d for d in yaml.safe_load_all(reference(path).read_text()) if d and d.get("kind") == "ConfigMap")


def configmap(namespace: str, name: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": namespace, "name": name}, "data": data}


def by_setting(findings: list[preflight.Finding]) -> dict[str, preflight.Finding]:
    out: dict[str, preflight.Finding] = {}
    for f in findings:
        out.setdefault(f.setting, f)
    return out


@pytest.fixture(scope="module")
def demo() -> PortalNeeds:
    return preflight.portal_needs(load_profile(DEMO_PROFILE))


@pytest.fixture(scope="module")
def knative_demo() -> PortalNeeds:
    """The demo cluster with endpoints served by Knative (kserve_deployment_mode: Knative)."""
    return preflight.portal_needs(replace(load_profile(DEMO_PROFILE), kserve_deployment_mode="Knative"))


@pytest.fixture(scope="module")
def kueue_demo() -> PortalNeeds:
    return preflight.portal_needs(load_profile(KUEUE_PROFILE))


# -- what the portal asks of the cluster ---------------------------------------------------


def test_the_demo_profile_needs_shared_gpu_and_dra_attribution_and_builds_an_endpoint_per_offering(demo):
    assert demo.queueing == "volcano"
    assert demo.shared_gpus is True
    assert demo.dra_device_classes == ("gpu.nvidia.com",)
    assert [e.offering for e in demo.endpoints] == sorted(load_profile(DEMO_PROFILE).offerings)
    assert demo.namespace_enforce == "restricted"
    assert [e.offering for e in demo.endpoints if e.uses_dra] == ["h100-80gb-dra"]


def test_a_gpu_endpoint_on_volcano_needs_the_knative_flags_for_every_pod_field_the_builder_sets(demo):
    h100 = next(e for e in demo.endpoints if e.offering == "h100-80gb")
    needs = preflight.knative_needs(h100.predictor)
    assert {
        "kubernetes.podspec-schedulername",
        "kubernetes.podspec-priorityclassname",
        "kubernetes.podspec-securitycontext",
        "kubernetes.podspec-nodeselector",
        "kubernetes.podspec-tolerations",
        "kubernetes.podspec-volumes-emptydir",
    } <= set(needs.flags)
    assert "resourceClaims" not in needs.never  # a device-plugin GPU, no DRA claim
    cpu = next(e for e in demo.endpoints if e.offering == "cpu")
    assert "kubernetes.podspec-affinity" in preflight.knative_needs(cpu.predictor).flags


def test_a_kueue_cluster_names_no_scheduler_so_endpoints_need_no_schedulername_flag(kueue_demo):
    assert kueue_demo.queueing == "kueue"
    for endpoint in kueue_demo.endpoints:
        assert "kubernetes.podspec-schedulername" not in preflight.knative_needs(endpoint.predictor).flags


def test_fieldrefs_and_never_allowed_fields_are_found_in_a_predictor():
    predictor = {
        "containers": [{"name": "c", "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}],
        "securityContext": {"fsGroupChangePolicy": "OnRootMismatch"},
        "automountServiceAccountToken": True,
        "resourceClaims": [{"name": "gpu"}],
    }
    needs = preflight.knative_needs(predictor)
    assert needs.flags["kubernetes.podspec-fieldref"] == {"env NODE valueFrom"}
    assert needs.never == {
        "resourceClaims",
        "securityContext.fsGroupChangePolicy",
        "automountServiceAccountToken: true",
    }


# -- KServe ----------------------------------------------------------------------------------


def test_kserves_knative_default_does_not_matter_because_every_endpoint_names_its_mode(demo, knative_demo):
    cm = upstream_configmap("kserve/inferenceservice-config.yaml")
    findings, mode = preflight.check_kserve(cm, None, demo)
    assert mode == "Knative"
    [deploy] = [f for f in findings if f.setting == "deploy.defaultDeploymentMode"]
    assert deploy.status == OK and deploy.detail.startswith("Serverless (endpoints run as Standard: ")
    findings, _ = preflight.check_kserve(cm, None, knative_demo)
    [deploy] = [f for f in findings if f.setting == "deploy.defaultDeploymentMode"]
    # DRA endpoints are Standard on a Knative cluster: Knative never allows resourceClaims
    assert deploy.status == OK and deploy.detail.endswith("; Standard: h100-80gb-dra)")


def test_upstream_storage_initializer_is_rejected_by_restricted_team_namespaces(demo):
    upstream_container = yaml.safe_load(reference("kserve/clusterstoragecontainer-default.yaml").read_text())
    findings, _ = preflight.check_kserve(
        upstream_configmap("kserve/inferenceservice-config.yaml"), upstream_container, demo
    )
    storage = by_setting(findings)["storageInitializer (securityContext)"]
    assert storage.status == FIX
    assert "'kserve/storage-initializer:latest'" in storage.detail
    assert "lacks allowPrivilegeEscalation: false, capabilities.drop: [ALL]" in storage.detail
    assert "ClusterStorageContainer 'default'" in storage.fix


def test_a_restricted_cluster_storage_container_satisfies_the_storage_initializer_check(demo):
    container = yaml.safe_load(reference("kserve/clusterstoragecontainer-default.yaml").read_text())
    container["spec"]["container"]["securityContext"] = copy.deepcopy(preflight.RESTRICTED_CONTAINER)
    findings, _ = preflight.check_kserve(upstream_configmap("kserve/inferenceservice-config.yaml"), container, demo)
    assert by_setting(findings)["storageInitializer (securityContext)"].status == OK


def test_baseline_team_namespaces_admit_the_storage_initializer_as_it_is(demo):
    baseline = preflight.PortalNeeds(**{**demo.__dict__, "namespace_enforce": "baseline"})
    findings, _ = preflight.check_kserve(upstream_configmap("kserve/inferenceservice-config.yaml"), None, baseline)
    assert by_setting(findings)["storageInitializer (securityContext)"].status == OK


def test_standard_mode_runs_dra_endpoints_and_skips_the_knative_flags(demo):
    cm = upstream_configmap("kserve/inferenceservice-config.yaml")
    cm["data"]["deploy"] = '{"defaultDeploymentMode": "RawDeployment"}'
    findings, mode = preflight.check_kserve(cm, None, demo)
    assert mode == "Standard"
    assert [f.status for f in findings if f.setting == "deploy.defaultDeploymentMode"] == [OK]
    (knative,) = preflight.check_knative(upstream_configmap("knative-serving/config-features.yaml"), demo, mode)
    assert knative.status == OK and "no endpoint runs in Knative mode" in knative.detail


def test_an_endpoint_annotated_with_its_mode_ignores_the_clusters_default(demo):
    annotated = [
        preflight.Endpoint(e.offering, {preflight.DEPLOYMENT_MODE_ANNOTATION: "Standard"}, e.predictor)
        for e in demo.endpoints
    ]
    needs = preflight.PortalNeeds(**{**demo.__dict__, "endpoints": tuple(annotated)})
    findings, _ = preflight.check_kserve(upstream_configmap("kserve/inferenceservice-config.yaml"), None, needs)
    assert [f.status for f in findings if f.setting == "deploy.defaultDeploymentMode"] == [OK]
    assert preflight.check_knative(None, needs, "Knative")[0].status == OK


def test_a_config_without_a_deploy_entry_is_named(demo):
    cm = upstream_configmap("kserve/inferenceservice-config.yaml")
    del cm["data"]["deploy"]
    findings, mode = preflight.check_kserve(cm, None, demo)
    assert mode == ""
    (deploy,) = [f for f in findings if f.setting == "deploy.defaultDeploymentMode"]
    assert deploy.status == FIX and "has no 'deploy' key" in deploy.detail


# -- Knative ---------------------------------------------------------------------------------


def test_upstream_knative_feature_flags_reject_the_fields_the_portal_sets(knative_demo):
    findings = by_setting(
        preflight.check_knative(upstream_configmap("knative-serving/config-features.yaml"), knative_demo, "Knative")
    )
    for flag in (
        "kubernetes.podspec-schedulername",
        "kubernetes.podspec-priorityclassname",
        "kubernetes.podspec-nodeselector",
        "kubernetes.podspec-tolerations",
        "kubernetes.podspec-affinity",
    ):
        assert findings[flag].status == FIX, flag
        assert "'disabled' (upstream default)" in findings[flag].detail
        assert f'"{flag}":"enabled"' in findings[flag].fix
    assert findings["kubernetes.podspec-volumes-emptydir"].status == OK
    # Knative-mode predictors carry the restricted settings per container and no DRA claims
    assert "kubernetes.podspec-securitycontext" not in findings
    assert "resourceClaims" not in findings and "securityContext.fsGroupChangePolicy" not in findings


def test_enabled_flags_pass_and_allowed_is_not_enough_where_knative_wants_exactly_enabled(knative_demo):
    flags = {flag for e in knative_demo.endpoints for flag in preflight.knative_needs(e.predictor).flags}
    data = {flag: "allowed" for flag in flags}
    findings = by_setting(
        preflight.check_knative(configmap("knative-serving", "config-features", data), knative_demo, "Knative")
    )
    assert findings["kubernetes.podspec-schedulername"].status == OK
    assert findings["kubernetes.podspec-volumes-emptydir"].status == FIX  # exactly "enabled"
    data = {flag: "enabled" for flag in flags}
    findings = preflight.check_knative(configmap("knative-serving", "config-features", data), knative_demo, "Knative")
    assert [f for f in findings if f.status != OK] == []


def test_a_missing_knative_is_named_when_endpoints_need_it(knative_demo):
    (finding,) = preflight.check_knative(None, knative_demo, "Knative", namespace="serving")
    assert finding.status == NOT_FOUND and finding.source == "ConfigMap serving/config-features"


def test_a_standard_cluster_needs_no_knative(demo):
    (finding,) = preflight.check_knative(None, demo, "Knative")
    assert finding.status == OK and "no endpoint runs in Knative mode" in finding.detail


# -- Volcano ---------------------------------------------------------------------------------


def volcano_cm(conf_path: str) -> dict:
    text = reference(conf_path).read_text()
    return configmap("volcano-system", "volcano-scheduler-configmap", {"volcano-scheduler.conf": text})


def test_upstream_volcano_default_lacks_preempt_and_reclaim_uses_proportion_and_has_no_dra(demo):
    findings = by_setting(preflight.check_volcano(volcano_cm("volcano/scheduler-config/volcano-scheduler.conf"), demo))
    assert findings["actions"].status == FIX
    assert findings["actions"].detail.startswith("enqueue, allocate, backfill; missing preempt (")
    assert "; reclaim (" in findings["actions"].detail
    # The fix lists the actions in the portal's order (Volcano runs them in the order listed).
    assert 'actions: "enqueue, allocate, preempt, reclaim, backfill"' in findings["actions"].fix
    for plugin in ("plugin gang", "plugin priority", "plugin predicates"):
        assert findings[plugin].status == OK, plugin
    queue = findings["queue plugin"]
    assert queue.status == FIX and "never reads Queue.spec.deserved" in queue.detail
    assert queue.fix.endswith("replace proportion with capacity")
    assert findings["predicates.predicate.DynamicResourceAllocationEnable"].status == FIX


def test_upstream_volcano_ci_configuration_has_every_action_but_proportion_instead_of_capacity(demo):
    findings = preflight.check_volcano(volcano_cm("volcano/scheduler-config/volcano-scheduler-ci.conf"), demo)
    assert [(f.setting, f.status) for f in findings if f.status != OK] == [("queue plugin", FIX)]


def test_the_portals_own_volcano_configuration_passes_every_check(demo):
    findings = preflight.check_volcano(scheduler_config.volcano_scheduler_configmap(), demo)
    assert [f for f in findings if f.status != OK] == []
    assert by_setting(findings)["queue plugin"].detail.startswith("capacity enforces")


def test_volcano_checks_the_actions_and_plugins_of_the_portals_configuration_with_a_reason_for_each():
    assert tuple(preflight.VOLCANO_ACTIONS) == scheduler_config.VOLCANO_ACTIONS
    assert all(preflight.VOLCANO_ACTIONS.values())
    configured = {p["name"] for tier in scheduler_config.VOLCANO_TIERS for p in tier}
    assert set(preflight.VOLCANO_PLUGINS) == {"gang", "priority", "predicates"} <= configured
    assert preflight.VOLCANO_QUEUE_PLUGIN in configured and preflight.VOLCANO_WRONG_QUEUE_PLUGIN not in configured


def test_capacity_and_proportion_enabled_together_is_named():
    conf = scheduler_config.volcano_scheduler_config()
    conf["tiers"][1]["plugins"].append({"name": "proportion"})
    cm = scheduler_config.volcano_scheduler_configmap(yaml.safe_dump(conf))
    queue = by_setting(preflight.check_volcano(cm, PortalNeeds()))["queue plugin"]
    assert queue.status == FIX and "both capacity and proportion are enabled" in queue.detail
    assert queue.fix.endswith("remove proportion (keep capacity)")


def test_volcano_without_gang_or_a_queue_plugin_is_named():
    conf = (
        'actions: "enqueue, allocate, preempt, reclaim, backfill"\n'
        "tiers:\n- plugins:\n  - name: priority\n  - name: predicates\n"
    )
    cm = configmap("volcano-system", "volcano-scheduler-configmap", {"volcano-scheduler.conf": conf})
    findings = by_setting(preflight.check_volcano(cm, PortalNeeds()))
    assert findings["actions"].status == OK
    assert findings["plugin gang"].status == FIX and "all their pods or none" in findings["plugin gang"].detail
    assert findings["queue plugin"].status == FIX and findings["queue plugin"].fix.endswith("add capacity")
    assert "predicates.predicate.DynamicResourceAllocationEnable" not in findings  # no DRA offerings


def test_volcano_is_not_checked_on_a_kueue_cluster(kueue_demo):
    (finding,) = preflight.check_volcano(None, kueue_demo)
    assert finding.status == OK and "queues with kueue" in finding.detail


# -- Kueue -----------------------------------------------------------------------------------


def kueue_cm(conf: str) -> dict:
    return configmap("kueue-system", "kueue-manager-config", {"controller_manager_config.yaml": conf})


def test_upstream_kueue_configuration_maps_no_dra_device_class_and_counts_cpu_and_memory(kueue_demo):
    needs = PortalNeeds(**{**kueue_demo.__dict__, "dra_device_classes": ("gpu.nvidia.com", "mig.nvidia.com")})
    findings = preflight.check_kueue(kueue_cm(reference("kueue/controller_manager_config.yaml").read_text()), needs)
    settings = by_setting(findings)
    for framework in ("trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset", "pod", "statefulset"):
        assert settings[f"integrations.frameworks {framework}"].status == OK
    mapping = settings["resources.deviceClassMappings gpu.nvidia.com"]
    assert mapping.status == FIX and "not mapped" in mapping.detail
    assert "{name: gpu.nvidia.com, deviceClassNames: [gpu.nvidia.com]}" in mapping.fix
    assert settings["resources.deviceClassMappings mig.nvidia.com"].status == FIX
    excluded = settings["resources.excludeResourcePrefixes"]
    assert excluded.status == FIX and "Kueue counts cpu and memory" in excluded.detail
    assert excluded.fix.endswith("resources.excludeResourcePrefixes: [cpu, memory]")
    labels = settings["integrations.labelKeysToCopy"]
    assert labels.status == FIX and "gpu-portal.io/workload-id" in labels.detail


def test_the_portals_own_kueue_configuration_passes_every_check(kueue_demo):
    needs = PortalNeeds(**{**kueue_demo.__dict__, "dra_device_classes": scheduler_config.DRA_DEVICE_CLASSES})
    findings = preflight.check_kueue(scheduler_config.kueue_manager_configmap(), needs)
    assert [f for f in findings if f.status != OK] == []
    assert {f.setting for f in findings} >= {
        "resources.deviceClassMappings gpu.nvidia.com",
        "resources.deviceClassMappings mig.nvidia.com",
        "resources.excludeResourcePrefixes",
        "integrations.labelKeysToCopy",
    }


def test_kueue_checks_the_integrations_of_the_portals_configuration_with_a_reason_for_each():
    assert tuple(preflight.KUEUE_FRAMEWORKS) == scheduler_config.KUEUE_FRAMEWORKS
    assert all(preflight.KUEUE_FRAMEWORKS.values())


def test_kueue_needs_the_statefulset_integration_only_for_dra_offerings(kueue_demo):
    no_dra = PortalNeeds(**{**kueue_demo.__dict__, "dra_device_classes": ()})
    findings = preflight.check_kueue(scheduler_config.kueue_manager_configmap(), no_dra)
    assert "integrations.frameworks statefulset" not in by_setting(findings)


def test_a_device_class_mapped_to_another_resource_than_the_cluster_queues_count_is_named(kueue_demo):
    needs = PortalNeeds(**{**kueue_demo.__dict__, "dra_device_classes": ("gpu.nvidia.com",)})
    conf = scheduler_config.kueue_manager_configuration()
    conf["resources"]["deviceClassMappings"] = [{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]
    mapping = by_setting(preflight.check_kueue(kueue_cm(yaml.safe_dump(conf)), needs))[
        "resources.deviceClassMappings gpu.nvidia.com"
    ]
    assert mapping.status == FIX
    assert "mapped to 'nvidia.com/gpu'" in mapping.detail and "'gpu.nvidia.com'" in mapping.detail


def test_excluding_a_gpu_resource_the_cluster_queues_count_is_named(kueue_demo):
    assert "nvidia.com/gpu" in kueue_demo.kueue_resources
    conf = scheduler_config.kueue_manager_configuration()
    conf["resources"]["excludeResourcePrefixes"] = ["cpu", "memory", "nvidia.com"]
    findings = [
        f
        for f in preflight.check_kueue(kueue_cm(yaml.safe_dump(conf)), kueue_demo)
        if f.setting == "resources.excludeResourcePrefixes"
    ]
    assert [f.status for f in findings] == [FIX]
    assert "excludes" in findings[0].detail and "nvidia.com/gpu" in findings[0].detail
    assert "quotas would not be enforced" in findings[0].detail


def test_the_needed_integrations_and_a_turned_off_dra_gate_are_named(kueue_demo):
    needs = PortalNeeds(**{**kueue_demo.__dict__, "dra_device_classes": ("gpu.nvidia.com",)})
    conf = scheduler_config.kueue_manager_configuration()
    conf["integrations"]["frameworks"].remove("pod")
    conf["featureGates"] = {"KueueDRAIntegration": False}
    findings = by_setting(preflight.check_kueue(kueue_cm(yaml.safe_dump(conf)), needs))
    assert findings["integrations.frameworks pod"].status == FIX
    assert findings["featureGates.KueueDRAIntegration"].status == FIX


def test_kueue_is_not_checked_on_a_volcano_cluster(demo):
    (finding,) = preflight.check_kueue(None, demo)
    assert finding.status == OK and "queues with volcano" in finding.detail


# -- dcgm-exporter ---------------------------------------------------------------------------


def dcgm_daemonset(env: list[dict], args: list[str] | None = None) -> dict:
    container = {"name": "nvidia-dcgm-exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3", "env": env}
    if args is not None:
        container["args"] = args
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"namespace": "gpu-operator", "name": "nvidia-dcgm-exporter"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def shared_only(demo: PortalNeeds) -> PortalNeeds:
    return PortalNeeds(**{**demo.__dict__, "dra_device_classes": ()})


def dra_only(demo: PortalNeeds) -> PortalNeeds:
    return PortalNeeds(**{**demo.__dict__, "shared_gpus": False})


def seeded_exporters(cluster_setup: str) -> dict[str, dict]:
    """The dcgm-exporter DaemonSets the sandbox seeds for the demo profile, by name."""
    profile = SimpleNamespace(cluster_setup=cluster_setup)
    return {obj["metadata"]["name"]: obj for _, obj in gpu_operator.exporter_daemonsets(profile)}


def test_the_upstream_helm_environment_attributes_pods_but_not_shared_or_dra_gpus(demo):
    # dcgm-exporter's Helm chart sets only DCGM_EXPORTER_KUBERNETES (labels.yaml); the other two default to false.
    ds = dcgm_daemonset([{"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"}])
    findings = by_setting(preflight.check_dcgm_exporter(ds, shared_only(demo)))
    assert findings["DCGM_EXPORTER_KUBERNETES"].status == OK
    assert findings["KUBERNETES_VIRTUAL_GPUS"].status == FIX
    assert "time-sliced GPUs" in findings["KUBERNETES_VIRTUAL_GPUS"].detail
    assert findings["KUBERNETES_VIRTUAL_GPUS"].fix.endswith("KUBERNETES_VIRTUAL_GPUS=true")
    findings = by_setting(preflight.check_dcgm_exporter(ds, dra_only(demo)))
    assert findings["KUBERNETES_ENABLE_DRA"].status == FIX
    assert findings["KUBERNETES_VIRTUAL_GPUS"].status == OK  # false, as DRA attribution needs


def test_a_daemonset_without_kubernetes_mode_is_named_and_flags_count_too(demo):
    findings = by_setting(preflight.check_dcgm_exporter(dcgm_daemonset([]), demo))
    assert findings["DCGM_EXPORTER_KUBERNETES"].status == FIX
    ds = dcgm_daemonset([{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "True"}], args=["--kubernetes"])
    assert {f.status for f in preflight.check_dcgm_exporter(ds, shared_only(demo))} == {OK}
    ds = dcgm_daemonset([], args=["--kubernetes", "--kubernetes-enable-dra=true"])
    assert {f.status for f in preflight.check_dcgm_exporter(ds, dra_only(demo))} == {OK}


def test_a_value_from_a_secret_cannot_be_judged_here(demo):
    ds = dcgm_daemonset([{"name": "DCGM_EXPORTER_KUBERNETES", "valueFrom": {"configMapKeyRef": {"name": "x"}}}])
    assert by_setting(preflight.check_dcgm_exporter(ds, demo))["DCGM_EXPORTER_KUBERNETES"].status == UNKNOWN


def test_only_what_the_profile_uses_is_asked_of_dcgm_exporter():
    ds = dcgm_daemonset([{"name": "DCGM_EXPORTER_KUBERNETES", "value": "1"}])
    assert [f.setting for f in preflight.check_dcgm_exporter(ds, PortalNeeds())] == ["DCGM_EXPORTER_KUBERNETES"]


def test_a_dra_only_profile_needs_virtual_gpus_off_because_that_branch_skips_dra():
    needs = PortalNeeds(dra_device_classes=("gpu.nvidia.com",))
    ds = dcgm_daemonset(
        [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"}], args=["--kubernetes", "--kubernetes-enable-dra"]
    )
    findings = by_setting(preflight.check_dcgm_exporter(ds, needs))
    virtual = findings["KUBERNETES_VIRTUAL_GPUS"]
    assert virtual.status == FIX and "returns before its DRA step" in virtual.detail
    assert virtual.fix.endswith("KUBERNETES_VIRTUAL_GPUS=false")
    assert findings["KUBERNETES_ENABLE_DRA"].status == OK
    assert all(f.source == "DaemonSet gpu-operator/nvidia-dcgm-exporter" for f in findings.values())


def test_the_sandboxs_recommended_exporters_attribute_shared_and_dra_gpus(demo):
    exporters = seeded_exporters("recommended")
    assert (preflight.DCGM_EXPORTER[1], preflight.DCGM_DRA_EXPORTER[1]) == (gpu_operator.NAME, gpu_operator.DRA_NAME)
    findings = preflight.check_dcgm_exporter(
        exporters[gpu_operator.NAME], demo, dra_daemonset=exporters[gpu_operator.DRA_NAME]
    )
    assert [f for f in findings if f.status != OK] == []
    dra = [f for f in findings if f.source == "DaemonSet gpu-operator/nvidia-dcgm-exporter-dra"]
    assert [f.setting for f in dra] == [
        "DCGM_EXPORTER_KUBERNETES",
        "KUBERNETES_ENABLE_DRA",
        "KUBERNETES_VIRTUAL_GPUS",
        "nodes",
    ]


def test_one_stock_exporter_cannot_attribute_both_shared_and_dra_gpus(demo):
    (stock,) = seeded_exporters("stock").values()
    findings = preflight.check_dcgm_exporter(stock, demo)
    main = by_setting([f for f in findings if f.source == "DaemonSet gpu-operator/nvidia-dcgm-exporter"])
    assert main["DCGM_EXPORTER_KUBERNETES"].status == OK
    assert main["KUBERNETES_VIRTUAL_GPUS"].status == FIX
    (missing,) = [f for f in findings if f.source == "DaemonSet gpu-operator/nvidia-dcgm-exporter-dra"]
    assert missing.status == NOT_FOUND
    assert "one exporter cannot attribute both" in missing.detail and "returns before its DRA step" in missing.detail
    assert "KUBERNETES_VIRTUAL_GPUS=false" in missing.fix and "--dcgm-exporter-dra" in missing.fix


def test_a_dra_exporter_with_virtual_gpus_on_or_sharing_nodes_with_the_other_is_named(demo):
    exporters = seeded_exporters("recommended")
    main, dra = exporters[gpu_operator.NAME], copy.deepcopy(exporters[gpu_operator.DRA_NAME])
    env = dra["spec"]["template"]["spec"]["containers"][0]["env"]
    next(e for e in env if e["name"] == "KUBERNETES_VIRTUAL_GPUS")["value"] = "true"
    findings = by_setting(preflight.check_dcgm_exporter(main, demo, dra_daemonset=dra))
    assert findings["KUBERNETES_VIRTUAL_GPUS"].status == OK  # the main exporter's comes first
    dra_findings = by_setting(
        [f for f in preflight.check_dcgm_exporter(main, demo, dra_daemonset=dra) if "-dra" in f.source]
    )
    assert dra_findings["KUBERNETES_VIRTUAL_GPUS"].status == FIX
    # Without its affinity the main exporter runs on DRA nodes too.
    overlapping = copy.deepcopy(main)
    del overlapping["spec"]["template"]["spec"]["affinity"]
    nodes = by_setting(preflight.check_dcgm_exporter(overlapping, demo, dra_daemonset=dra))["nodes"]
    assert nodes.status == FIX and "exported twice" in nodes.detail
    assert "operator: DoesNotExist" in nodes.fix and "nvidia.com/dra-driver-gpu" in nodes.fix
    # Without a nodeSelector the DRA exporter runs on the shared-GPU nodes.
    del dra["spec"]["template"]["spec"]["nodeSelector"]
    nodes = by_setting(preflight.check_dcgm_exporter(main, demo, dra_daemonset=dra))["nodes"]
    assert nodes.status == FIX and "no nodeSelector" in nodes.detail


def test_a_shared_gpu_only_profile_needs_no_second_exporter(demo):
    (stock,) = seeded_exporters("stock").values()
    findings = preflight.check_dcgm_exporter(stock, shared_only(demo))
    assert {f.source for f in findings} == {"DaemonSet gpu-operator/nvidia-dcgm-exporter"}


# -- all together ----------------------------------------------------------------------------

REFS = {
    "kserve": "kserve",
    "knative": "knative-serving",
    "volcano": "volcano-system",
    "kueue": "kueue-system",
    "dcgm": ("gpu-operator", "nvidia-dcgm-exporter"),
}


def test_absent_objects_are_reported_as_not_found_with_where_they_were_looked_for(demo):
    findings = preflight.check_all({}, demo, REFS)
    statuses = {f.source: f.status for f in findings}
    assert statuses["ConfigMap kserve/inferenceservice-config"] == NOT_FOUND
    assert statuses["ConfigMap volcano-system/volcano-scheduler-configmap"] == NOT_FOUND
    assert statuses["DaemonSet gpu-operator/nvidia-dcgm-exporter"] == NOT_FOUND
    # KServe's mode is unknown, so Knative's flags cannot be judged; Kueue is not used.
    assert statuses["ConfigMap knative-serving/config-features"] == UNKNOWN
    assert statuses["ConfigMap kueue-system/kueue-manager-config"] == OK


def test_an_unreadable_object_is_reported_instead_of_checked(demo):
    findings = preflight.check_all({}, demo, REFS, {"volcano": "403 Forbidden: configmaps is forbidden"})
    (volcano,) = [f for f in findings if "volcano" in f.source]
    assert volcano.status == UNKNOWN and "403 Forbidden" in volcano.detail


def test_an_unreadable_dra_exporter_is_reported_instead_of_missing(demo):
    refs = {**REFS, "dcgm_dra": ("gpu-operator", "nvidia-dcgm-exporter-dra")}
    findings = preflight.check_all({}, demo, refs, {"dcgm_dra": "403 Forbidden: daemonsets is forbidden"})
    (dra,) = [f for f in findings if f.source == "DaemonSet gpu-operator/nvidia-dcgm-exporter-dra"]
    assert dra.status == UNKNOWN and "403 Forbidden" in dra.detail
