"""The emulated API server, seen through the official client."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from sandbox.kinds import KINDS

APPLY = "application/apply-patch+yaml"


def configmap(
    name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None, namespace: str = "default"
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": data or {},
    }


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_discovery_lets_the_dynamic_client_resolve_every_kind(sandbox, tmp_path):
    dyn = DynamicClient(sandbox.api_client(), cache_file=str(tmp_path / "discovery.json"))
    for kind in KINDS:
        for version in kind.versions:
            resource = dyn.resources.get(api_version=kind.api_version(version), kind=kind.kind)
            assert resource.namespaced == kind.namespaced
            assert resource.name == kind.plural
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    assert "log" in pods.subresources and "status" in pods.subresources
    assert dyn.version["kubernetes"]["minor"] == "34"


def test_the_dynamic_client_lists_nodes_built_from_the_profile(sandbox, tmp_path):
    dyn = DynamicClient(sandbox.api_client(), cache_file=str(tmp_path / "discovery.json"))
    nodes = dyn.resources.get(api_version="v1", kind="Node").get()
    names = sorted(n.metadata.name for n in nodes.items)
    assert names == ["a100-mig-0", "cpu-0", "cpu-1", "h100-0", "h100-1", "h100-dra-0", "l4-shared-0", "l4-shared-1"]


def test_it_rejects_requests_without_the_bearer_token(sandbox):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{sandbox.url}/api/v1/namespaces", timeout=5)
    assert err.value.code == 401
    assert json.loads(err.value.read())["reason"] == "Unauthorized"


def test_create_get_and_list_with_equality_and_set_based_label_selectors(core):
    for name, tier, team in (("a", "web", "blue"), ("b", "db", "blue"), ("c", "web", "green"), ("d", "", "")):
        labels = {"tier": tier, "team": team} if tier else {}
        core.create_namespaced_config_map("default", configmap(name, labels))
    assert core.read_namespaced_config_map("a", "default").metadata.labels == {"tier": "web", "team": "blue"}

    def names(selector: str) -> list[str]:
        return [c.metadata.name for c in core.list_namespaced_config_map("default", label_selector=selector).items]

    assert names("tier=web") == ["a", "c"]
    assert names("tier!=web") == ["b", "d"]
    assert names("tier in (web,db),team=blue") == ["a", "b"]
    assert names("team notin (blue)") == ["c", "d"]
    assert names("tier") == ["a", "b", "c"]
    assert names("!tier") == ["d"]
    every = core.list_config_map_for_all_namespaces(label_selector="team=green").items
    assert [c.metadata.name for c in every] == ["c"]
    assert core.list_namespaced_config_map("default", field_selector="metadata.name=b").items[0].metadata.name == "b"


def test_list_paginates_with_limit_and_continue_tokens(core):
    for i in range(25):
        core.create_namespaced_config_map("default", configmap(f"cm-{i:02d}"))
    seen, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map("default", limit=10, _continue=token)
        seen += [c.metadata.name for c in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 25 - len(seen)
    assert pages == 3
    assert seen == [f"cm-{i:02d}" for i in range(25)]


def test_it_generates_names_and_keeps_system_metadata(core):
    created = core.create_namespaced_config_map("default", {"metadata": {"generateName": "job-"}, "data": {}})
    assert created.metadata.name.startswith("job-") and len(created.metadata.name) == 9
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert int(created.metadata.resource_version) > 0


def test_objects_in_a_missing_namespace_are_not_found(core):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("nowhere", configmap("x", namespace="nowhere"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "nowhere" not found'


def test_creating_an_existing_object_is_already_exists(core):
    core.create_namespaced_config_map("default", configmap("dup"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", configmap("dup"))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"


def test_a_watch_from_a_resource_version_gets_the_events_after_it(core):
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap("w1"))
    core.patch_namespaced_config_map("w1", "default", {"data": {"k": "v"}})
    core.delete_namespaced_config_map("w1", "default")
    w = watch.Watch()
    events = []
    for e in w.stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=5):
        events.append((e["type"], e["object"].metadata.name))
        if len(events) == 3:
            w.stop()
    assert events == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_a_label_selected_watch_sees_objects_leave_the_selection(core):
    core.create_namespaced_config_map("default", configmap("sel", {"keep": "yes"}))
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.patch_namespaced_config_map("sel", "default", {"metadata": {"labels": {"keep": "no"}}})
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_config_map, "default", resource_version=start, label_selector="keep=yes", timeout_seconds=5
    ):
        assert (event["type"], event["object"].metadata.labels) == ("DELETED", {"keep": "no"})
        w.stop()


def test_a_watch_from_a_compacted_resource_version_is_gone(sandbox, core):
    old = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap("later"))
    sandbox.compact()
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=1
        ):
            pass
    assert err.value.status == 410
    assert "too old resource version" in err.value.reason


def test_server_side_apply_creates_updates_and_removes_fields_it_no_longer_applies(core):
    first = configmap("ssa", {"app": "x", "old": "1"}, {"a": "1", "b": "2"})
    created = core.patch_namespaced_config_map("ssa", "default", first, field_manager="portal", _content_type=APPLY)
    assert created.data == {"a": "1", "b": "2"}
    assert [m.manager for m in created.metadata.managed_fields] == ["portal"]
    assert created.metadata.managed_fields[0].operation == "Apply"
    second = configmap("ssa", {"app": "x"}, {"a": "10"})
    updated = core.patch_namespaced_config_map("ssa", "default", second, field_manager="portal", _content_type=APPLY)
    assert updated.data == {"a": "10"}
    assert updated.metadata.labels == {"app": "x"}
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)


def test_server_side_apply_requires_a_field_manager(core):
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("nofm", "default", configmap("nofm"), _content_type=APPLY)
    assert err.value.status == 422


def test_server_side_apply_conflicts_with_another_managers_field_unless_forced(core):
    core.patch_namespaced_config_map(
        "shared",
        "default",
        configmap("shared", data={"owner": "a", "x": "1"}),
        field_manager="alpha",
        _content_type=APPLY,
    )
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "shared", "default", configmap("shared", data={"owner": "b"}), field_manager="beta", _content_type=APPLY
        )
    body = status_of(err.value)
    assert err.value.status == 409 and body["reason"] == "Conflict"
    assert body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alpha" using v1', "field": ".data.owner"}
    ]
    forced = core.patch_namespaced_config_map(
        "shared",
        "default",
        configmap("shared", data={"owner": "b"}),
        field_manager="beta",
        _content_type=APPLY,
        force=True,
    )
    assert forced.data == {"owner": "b", "x": "1"}
    owners = {m.manager: m.fields_v1 for m in forced.metadata.managed_fields}
    assert owners["beta"]["f:data"] == {"f:owner": {}}
    assert owners["alpha"]["f:data"] == {"f:x": {}}


def test_replace_with_a_stale_resource_version_is_a_conflict(core):
    cm = core.create_namespaced_config_map("default", configmap("cas", data={"v": "1"}))
    core.patch_namespaced_config_map("cas", "default", {"data": {"v": "2"}})
    cm.data = {"v": "3"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cas", "default", cm)
    assert err.value.status == 409
    assert "the object has been modified" in status_of(err.value)["message"]


def test_the_status_subresource_changes_only_status(custom):
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q-status"},
        "spec": {"weight": 1},
    }
    created = custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", body)
    changed = custom.patch_cluster_custom_object_status(
        "scheduling.volcano.sh", "v1beta1", "queues", "q-status", {"spec": {"weight": 5}, "status": {"state": "Closed"}}
    )
    assert changed["status"]["state"] == "Closed" and changed["spec"]["weight"] == 1
    main = custom.patch_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", "q-status", {"spec": {"weight": 3}, "status": {"state": "Open"}}
    )
    assert main["spec"]["weight"] == 3 and main["status"]["state"] == "Closed"
    assert main["metadata"]["generation"] == created["metadata"]["generation"] + 1


def test_a_deleted_object_is_not_found_and_its_dependents_are_collected(sandbox, core):
    owner = core.create_namespaced_config_map("default", configmap("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    dependent = configmap("dependent")
    dependent["metadata"]["ownerReferences"] = [ref]
    core.create_namespaced_config_map("default", dependent)
    core.delete_namespaced_config_map("owner", "default")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("owner", "default")
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("owner", "default")
    assert err.value.status == 404
    sandbox.settle()
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == []


def test_orphan_deletion_keeps_dependents_without_the_owner_reference(sandbox, core):
    owner = core.create_namespaced_config_map("default", configmap("parent"))
    child = configmap("child")
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "parent", "uid": owner.metadata.uid}
    ]
    core.create_namespaced_config_map("default", child)
    core.delete_namespaced_config_map("parent", "default", propagation_policy="Orphan")
    sandbox.settle()
    assert core.read_namespaced_config_map("child", "default").metadata.owner_references is None


def test_a_finalizer_holds_deletion_until_it_is_removed(core):
    cm = configmap("held")
    cm["metadata"]["finalizers"] = ["tests.example.com/hold"]
    core.create_namespaced_config_map("default", cm)
    core.delete_namespaced_config_map("held", "default")
    assert core.read_namespaced_config_map("held", "default").metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("held", "default")
    assert err.value.status == 404


def test_deleting_a_namespace_removes_its_contents(sandbox, core):
    core.create_namespace({"metadata": {"name": "team-gone"}})
    core.create_namespaced_config_map("team-gone", configmap("x", namespace="team-gone"))
    core.delete_namespace("team-gone")
    assert core.read_namespace("team-gone").status.phase == "Terminating"
    sandbox.settle()
    with pytest.raises(ApiException) as err:
        core.read_namespace("team-gone")
    assert err.value.status == 404


def test_pod_validation_reports_each_problem_as_a_cause(core):
    pod = {
        "metadata": {"name": "bad"},
        "spec": {
            "containers": [
                {"name": "a"},
                {
                    "name": "b",
                    "image": "x",
                    "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
                },
            ]
        },
    }
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod)
    body = status_of(err.value)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    fields = sorted(c["field"] for c in body["details"]["causes"])
    assert fields == ["spec.containers[0].image", "spec.containers[1].resources.requests[nvidia.com/gpu]"]
    assert body["message"].startswith('Pod "bad" is invalid: [')


def test_pod_logs_follow_the_simulated_clock_and_honour_tail_lines(sandbox, core):
    pod = {"metadata": {"name": "logger"}, "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}
    core.create_namespaced_pod("default", pod)
    sandbox.settle()
    sandbox.advance(150)
    text = core.read_namespaced_pod_log("logger", "default")
    assert len(text.splitlines()) == 11
    assert core.read_namespaced_pod_log("logger", "default", tail_lines=2).count("\n") == 2
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("logger", "default", container="nope")
    assert err.value.status == 400


def test_notebooks_are_served_in_v1beta1_too(custom, make_notebook):
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", "default", "notebooks", make_notebook("nb", {"cpu": "1"}, product=None)
    )
    old = custom.get_namespaced_custom_object("kubeflow.org", "v1beta1", "default", "notebooks", "nb")
    assert old["apiVersion"] == "kubeflow.org/v1beta1"


def test_an_invalid_trainjob_is_rejected_with_one_cause_per_error(validating_sandbox):
    custom = client.CustomObjectsApi(validating_sandbox.api_client())
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "bad-job", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": "two", "gpus": 4}},
    }
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", body)
    status = status_of(err.value)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["kind"] == "TrainJob" and status["details"]["group"] == "trainer.kubeflow.org"
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert causes["spec.trainer.gpus"] == 'unknown field "spec.trainer.gpus"'
    assert "spec.trainer.numNodes in body must be of type integer" in causes["spec.trainer.numNodes"]


def test_valid_custom_resources_get_their_schema_defaults(validating_sandbox):
    custom = client.CustomObjectsApi(validating_sandbox.api_client())
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "good-job", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
    }
    created = custom.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", body)
    assert created["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    assert created["spec"]["suspend"] is False


def test_a_notebook_without_a_container_image_is_invalid_per_the_upstream_patch(validating_sandbox):
    custom = client.CustomObjectsApi(validating_sandbox.api_client())
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": "noimg"},
        "spec": {"template": {"spec": {"containers": [{"name": "noimg"}]}}},
    }
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", body)
    causes = status_of(err.value)["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.template.spec.containers[0].image"]


def test_a_watch_started_in_another_thread_streams_live_changes(core):
    seen: list[str] = []
    ready = threading.Event()

    def consume():
        w = watch.Watch()
        rv = core.list_namespaced_config_map("default").metadata.resource_version
        ready.set()
        for event in w.stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5):
            seen.append(event["object"].metadata.name)
            if len(seen) == 2:
                w.stop()

    t = threading.Thread(target=consume)
    t.start()
    ready.wait(5)
    core.create_namespaced_config_map("default", configmap("live-1"))
    core.create_namespaced_config_map("default", configmap("live-2"))
    t.join(10)
    assert seen == ["live-1", "live-2"]


def test_field_validation_warn_drops_unknown_fields_with_a_warning(validating_sandbox):
    custom = client.CustomObjectsApi(validating_sandbox.api_client())
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "lenient", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1, "gpus": 4}},
    }
    data, _, headers = custom.create_namespaced_custom_object_with_http_info(
        "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", body, field_validation="Warn"
    )
    assert "gpus" not in data["spec"]["trainer"]
    assert headers["Warning"] == '299 - "unknown field \\"spec.trainer.gpus\\""'
