"""jobs.kube.client over real HTTP against a scripted API server (tests/kube_client/fake_api.py)."""

from __future__ import annotations

import socket
import time

import pytest
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException, ConflictException, UnprocessableEntityException

from jobs.kube.client import FIELD_MANAGER, Cluster
from jobs.kube.errors import (
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    Throttled,
    Transient,
    WatchExpired,
)
from jobs.kube.kinds import UnknownKind
from tests.kube_client.fake_api import Reply, error

TRAINJOB_PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/run-1"


def trainjob(**spec) -> dict:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "run-1", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def stored(obj: dict, resource_version: str = "5") -> dict:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": resource_version}}


def conflict() -> Reply:
    return error(409, "Conflict", 'Operation cannot be fulfilled on trainjobs "run-1": the object has been modified')


# -- apply ---------------------------------------------------------------------------


def test_apply_sends_a_forced_server_side_apply_with_the_portal_field_manager(fake_api, cluster):
    obj = trainjob()
    fake_api.reply(Reply(200, stored(obj)))

    result = cluster.apply(obj)

    assert result["metadata"]["resourceVersion"] == "5"
    (request,) = fake_api.requests
    assert (request.method, request.path) == ("PATCH", TRAINJOB_PATH)
    assert request.headers["content-type"] == "application/apply-patch+yaml"
    assert request.query == {"fieldManager": FIELD_MANAGER, "force": "true", "fieldValidation": "Strict"}
    assert request.body == obj
    assert FIELD_MANAGER == "gpu-portal"


def test_apply_of_a_cluster_scoped_core_kind_uses_the_core_path(fake_api, cluster):
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    fake_api.reply(Reply(200, namespace))

    cluster.apply(namespace)

    assert fake_api.requests[0].path == "/api/v1/namespaces/team-a"


def test_apply_all_applies_in_order(fake_api, cluster):
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    fake_api.fallback = lambda request: Reply(200, request.body)

    cluster.apply_all([namespace, trainjob()])

    assert [r.path for r in fake_api.requests] == ["/api/v1/namespaces/team-a", TRAINJOB_PATH]


def test_apply_refuses_a_kind_the_portal_does_not_manage(fake_api, cluster):
    with pytest.raises(UnknownKind):
        cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"}})
    assert fake_api.requests == []


def test_apply_refuses_a_namespaced_object_without_a_namespace(cluster):
    obj = trainjob()
    del obj["metadata"]["namespace"]

    with pytest.raises(ValueError, match="namespace is required"):
        cluster.apply(obj)


def test_a_422_becomes_invalid_with_the_api_causes_and_the_original_exception(fake_api, cluster):
    fake_api.reply(
        error(
            422,
            "Invalid",
            'TrainJob.trainer.kubeflow.org "run-1" is invalid: spec.trainer.numNodes: Invalid value: 0: ...',
            causes=[
                {"reason": "FieldValueInvalid", "field": "spec.trainer.numNodes", "message": "Invalid value: 0: ..."}
            ],
        )
    )

    with pytest.raises(Invalid) as caught:
        cluster.apply(trainjob(trainer={"numNodes": 0}))

    assert caught.value.status == 422
    assert caught.value.transient is False
    assert caught.value.causes == [("spec.trainer.numNodes", "Invalid value: 0: ...")]
    assert str(caught.value) == "spec.trainer.numNodes: Invalid value: 0: ..."
    assert isinstance(caught.value.__cause__, UnprocessableEntityException)
    assert len(fake_api.requests) == 1  # permanent: not retried


def test_a_409_is_reread_and_retried_until_it_succeeds(fake_api, cluster):
    obj = trainjob()
    fake_api.reply(conflict(), Reply(200, stored(obj)), conflict(), Reply(200, stored(obj)), Reply(200, stored(obj)))

    assert cluster.apply(obj)["metadata"]["resourceVersion"] == "5"
    assert [r.method for r in fake_api.requests] == ["PATCH", "GET", "PATCH", "GET", "PATCH"]


def test_a_409_retry_locks_on_the_fresh_resource_version_when_the_object_carried_one(fake_api, cluster):
    obj = stored(trainjob(), resource_version="3")
    fake_api.reply(conflict(), Reply(200, stored(obj, "9")), Reply(200, stored(obj, "10")))

    cluster.apply(obj)

    assert fake_api.requests[2].body["metadata"]["resourceVersion"] == "9"
    assert obj["metadata"]["resourceVersion"] == "3"  # the caller's dict is left alone


def test_a_409_that_persists_raises_conflict_after_three_retries(fake_api, cluster):
    fake_api.fallback = lambda request: conflict() if request.method == "PATCH" else Reply(200, stored(trainjob()))

    with pytest.raises(Conflict) as caught:
        cluster.apply(trainjob())

    assert [r.method for r in fake_api.requests].count("PATCH") == 4
    assert caught.value.status == 409
    assert caught.value.transient is True
    assert isinstance(caught.value.__cause__, ConflictException)


def test_a_429_becomes_throttled_with_retry_after_and_the_client_does_not_wait(fake_api, cluster):
    fake_api.reply(error(429, "TooManyRequests", "Too many requests", headers={"Retry-After": "12"}))

    started = time.monotonic()
    with pytest.raises(Throttled) as caught:
        cluster.apply(trainjob())

    assert time.monotonic() - started < 1
    assert caught.value.retry_after == 12.0
    assert caught.value.transient is True
    assert len(fake_api.requests) == 1


def test_a_500_becomes_transient_and_is_not_retried_by_the_client(fake_api, cluster):
    fake_api.fallback = lambda request: error(500, "InternalError", "etcdserver: request timed out")

    with pytest.raises(Transient) as caught:
        cluster.get("kubeflow.org/v1", "Notebook", "nb", "team-a")

    assert caught.value.status == 500
    assert caught.value.message == "etcdserver: request timed out"
    assert isinstance(caught.value.__cause__, ApiException)
    assert len(fake_api.requests) == 1


def test_a_403_quota_rejection_is_forbidden_with_the_message_kept(fake_api, cluster):
    message = 'pvc "data" is forbidden: exceeded quota: team-a, requested: requests.storage=1Ti'
    fake_api.reply(error(403, "Forbidden", message))

    with pytest.raises(Forbidden) as caught:
        cluster.apply(trainjob())

    assert caught.value.message == message
    assert caught.value.transient is False


def test_a_hung_server_becomes_transient_after_one_request_timeout(fake_api):
    # A GET is what urllib3 would silently retry; one timeout, not four, proves it does not.
    fake_api.fallback = lambda request: Reply(200, {}, delay=3)
    with Cluster(ApiClient(Configuration(host=fake_api.url)), request_timeout=0.5) as cluster:
        started = time.monotonic()
        with pytest.raises(Transient) as caught:
            cluster.get("kubeflow.org/v1", "Notebook", "nb", "team-a")

    assert time.monotonic() - started < 1.5
    assert caught.value.reason == "Timeout"
    assert caught.value.status is None
    assert len(fake_api.requests) == 1


def test_a_refused_connection_becomes_transient():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more.
    with Cluster(ApiClient(Configuration(host=f"http://127.0.0.1:{port}")), request_timeout=1) as cluster:
        started = time.monotonic()
        with pytest.raises(Transient) as caught:
            cluster.apply(trainjob())

    assert caught.value.reason == "ConnectionError"
    assert "refused" in caught.value.message.lower()
    assert time.monotonic() - started < 1


def test_every_request_carries_the_request_timeout(fake_api):
    api_client = ApiClient(Configuration(host=fake_api.url))
    seen = []
    call_api = api_client.call_api

    def spy(*args, **kwargs):
        seen.append(kwargs.get("_request_timeout"))
        return call_api(*args, **kwargs)

    api_client.call_api = spy
    fake_api.fallback = lambda request: Reply(200, {"metadata": {"resourceVersion": "1"}, "items": []})
    cluster = Cluster(api_client, request_timeout=7)

    cluster.get("v1", "Pod", "p", "team-a")
    cluster.list("v1", "Pod", label_selector="a=b")
    cluster.delete("v1", "Pod", "p", "team-a")
    cluster.merge_patch("v1", "Pod", "p", {"metadata": {"labels": {"a": "c"}}}, "team-a")

    assert seen == [7, 7, 7, 7]


def test_it_switches_off_the_urllib3_retries_of_the_client_it_is_given(fake_api):
    api_client = ApiClient(Configuration(host=fake_api.url))
    assert api_client.configuration.retries is None

    Cluster(api_client)

    assert api_client.configuration.retries is False
    # The pool manager holds its own copy; urllib3 keeps False as Retry(total=False).
    pooled = api_client.rest_client.pool_manager.connection_pool_kw["retries"]
    assert pooled is False or pooled.total is False


# -- delete, get, merge patch --------------------------------------------------------


def test_delete_asks_for_background_propagation(fake_api, cluster):
    fake_api.reply(Reply(200, {"kind": "Status", "status": "Success"}))

    assert cluster.delete("trainer.kubeflow.org/v1alpha1", "TrainJob", "run-1", "team-a") is True
    (request,) = fake_api.requests
    assert (request.method, request.path) == ("DELETE", TRAINJOB_PATH)
    assert request.body["propagationPolicy"] == "Background"


def test_delete_of_a_missing_object_returns_false(fake_api, cluster):
    fake_api.reply(error(404, "NotFound", 'trainjobs.trainer.kubeflow.org "run-1" not found'))

    assert cluster.delete("trainer.kubeflow.org/v1alpha1", "TrainJob", "run-1", "team-a") is False


def test_delete_that_conflicts_with_an_object_already_gone_returns_false(fake_api, cluster):
    fake_api.reply(conflict(), error(404, "NotFound", "gone"))

    assert cluster.delete("trainer.kubeflow.org/v1alpha1", "TrainJob", "run-1", "team-a") is False
    assert [r.method for r in fake_api.requests] == ["DELETE", "GET"]


def test_get_of_a_missing_object_returns_none_and_require_raises_not_found(fake_api, cluster):
    fake_api.fallback = lambda request: error(404, "NotFound", "not found")

    assert cluster.get("kubeflow.org/v1", "Notebook", "nb", "team-a") is None
    with pytest.raises(NotFound):
        cluster.require("kubeflow.org/v1", "Notebook", "nb", "team-a")


def test_merge_patch_sends_only_the_change_as_a_merge_patch(fake_api, cluster):
    patch = {"metadata": {"annotations": {"kubeflow-resource-stopped": "2026-01-01T00:00:00Z"}}}
    fake_api.reply(Reply(200, {"metadata": {"name": "nb"}}))

    cluster.merge_patch("kubeflow.org/v1", "Notebook", "nb", patch, "team-a")

    (request,) = fake_api.requests
    assert request.path == "/apis/kubeflow.org/v1/namespaces/team-a/notebooks/nb"
    assert request.headers["content-type"] == "application/merge-patch+json"
    assert request.query == {"fieldManager": FIELD_MANAGER}
    assert request.body == patch


def test_merge_patch_of_an_object_deleted_during_a_conflict_raises_not_found(fake_api, cluster):
    fake_api.reply(conflict(), error(404, "NotFound", "gone"))

    with pytest.raises(NotFound):
        cluster.merge_patch("kubeflow.org/v1", "Notebook", "nb", {"metadata": {}}, "team-a")


# -- list and watch ------------------------------------------------------------------


def test_list_follows_continue_tokens_and_keeps_the_snapshot_resource_version(fake_api, cluster):
    page = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook"}
    fake_api.reply(
        Reply(
            200,
            {"metadata": {"resourceVersion": "40", "continue": "t1"}, "items": [{**page, "metadata": {"name": "a"}}]},
        ),
        Reply(
            200,
            {"metadata": {"resourceVersion": "40", "continue": "t2"}, "items": [{**page, "metadata": {"name": "b"}}]},
        ),
        Reply(200, {"metadata": {"resourceVersion": "40"}, "items": [{**page, "metadata": {"name": "c"}}]}),
    )
    small = Cluster(ApiClient(Configuration(host=fake_api.url)), page_size=1)

    notebooks = small.list(
        "kubeflow.org/v1", "Notebook", label_selector={"team": "a", "app.kubernetes.io/managed-by": "gpu-portal"}
    )

    assert [n["metadata"]["name"] for n in notebooks] == ["a", "b", "c"]
    assert notebooks.resource_version == "40"
    assert [r.query.get("continue") for r in fake_api.requests] == [None, "t1", "t2"]
    first = fake_api.requests[0]
    assert first.path == "/apis/kubeflow.org/v1/notebooks"  # all namespaces in one list
    assert first.query["labelSelector"] == "app.kubernetes.io/managed-by=gpu-portal,team=a"
    assert first.query["limit"] == "1"


def test_list_fills_in_kind_on_items_of_built_in_lists(fake_api, cluster):
    fake_api.reply(
        Reply(200, {"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "p"}}]})
    )

    (pod,) = cluster.pods_for("team-a", "workload=1")

    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert fake_api.requests[0].path == "/api/v1/namespaces/team-a/pods"


def test_list_restarts_once_when_its_continue_token_expires(fake_api, cluster):
    fake_api.reply(
        Reply(200, {"metadata": {"resourceVersion": "40", "continue": "t1"}, "items": [{"metadata": {"name": "a"}}]}),
        error(410, "Expired", "The provided continue parameter is too old"),
        Reply(
            200,
            {
                "metadata": {"resourceVersion": "90"},
                "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
            },
        ),
    )

    pods = cluster.list("v1", "Pod", label_selector="x=y")

    assert [p["metadata"]["name"] for p in pods] == ["a", "b"]
    assert pods.resource_version == "90"


def test_list_of_a_kind_the_cluster_lacks_is_not_found(fake_api, cluster):
    fake_api.reply(error(404, "NotFound", "the server could not find the requested resource"))

    with pytest.raises(NotFound):
        cluster.list("kueue.x-k8s.io/v1beta2", "Workload", label_selector="a=b")


def test_a_list_error_other_than_an_expired_token_is_raised_as_is(fake_api, cluster):
    fake_api.reply(error(410, "Expired", "too old"))

    with pytest.raises(Expired):
        cluster.list("v1", "Pod", label_selector="a=b")


def test_watch_yields_changes_after_the_resource_version_until_the_server_ends_it(fake_api, cluster):
    pod = {"metadata": {"name": "p", "resourceVersion": "41"}}
    fake_api.reply(
        Reply(
            stream=[
                {"type": "ADDED", "object": pod},
                {"type": "MODIFIED", "object": {"metadata": {"name": "p", "resourceVersion": "42"}}},
                {
                    "type": "BOOKMARK",
                    "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "50"}},
                },
            ]
        )
    )

    events = list(cluster.watch("v1", "Pod", label_selector="a=b", resource_version="40", timeout_seconds=5))

    assert [(t, o["metadata"]["resourceVersion"]) for t, o in events] == [
        ("ADDED", "41"),
        ("MODIFIED", "42"),
        ("BOOKMARK", "50"),
    ]
    assert events[0][1]["kind"] == "Pod"
    query = fake_api.requests[0].query
    assert query["watch"] == "true"
    assert query["resourceVersion"] == "40"
    assert query["timeoutSeconds"] == "5"
    assert query["allowWatchBookmarks"] == "true"
    assert query["labelSelector"] == "a=b"


def test_a_watch_error_event_with_410_raises_watch_expired(fake_api, cluster):
    gone = {
        "kind": "Status",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
        "message": "too old resource version: 40 (90)",
    }
    fake_api.reply(Reply(stream=[{"type": "ERROR", "object": gone}]))

    events = cluster.watch("v1", "Pod", label_selector="a=b", resource_version="40", timeout_seconds=5)
    with pytest.raises(WatchExpired) as caught:
        list(events)

    assert caught.value.status == 410
    assert "too old resource version" in caught.value.message
    assert isinstance(caught.value.__cause__, ApiException)


def test_a_watch_refused_with_http_410_raises_watch_expired_at_once(fake_api, cluster):
    fake_api.reply(error(410, "Expired", "too old resource version: 1 (90)"))

    with pytest.raises(WatchExpired):
        cluster.watch("v1", "Pod", label_selector="a=b", resource_version="1", timeout_seconds=5)


def test_a_watch_whose_connection_drops_raises_transient_after_the_whole_events(fake_api, cluster):
    fake_api.reply(Reply(stream=[{"type": "ADDED", "object": {"metadata": {"name": "p"}}}], cut=True))

    events = cluster.watch("v1", "Pod", label_selector="a=b", resource_version="1", timeout_seconds=5)

    assert next(events)[0] == "ADDED"
    with pytest.raises(Transient) as caught:
        next(events)
    assert caught.value.reason == "ConnectionError"


def test_a_watch_that_ends_inside_an_event_raises_transient_instead_of_a_half_event(fake_api, cluster):
    fake_api.reply(Reply(stream=[b'{"type": "ADDED", "object": {"metadata": {"name": "p"}}}\n{"type": "MOD']))

    events = cluster.watch("v1", "Pod", label_selector="a=b", resource_version="1", timeout_seconds=5)

    assert next(events)[0] == "ADDED"
    with pytest.raises(Transient, match="inside an event"):
        next(events)


# -- events, logs --------------------------------------------------------------------


def test_events_for_selects_by_involved_object_name_oldest_first(fake_api, cluster):
    fake_api.reply(
        Reply(
            200,
            {
                "metadata": {"resourceVersion": "3"},
                "items": [
                    {"metadata": {"name": "e2"}, "lastTimestamp": "2026-01-01T10:05:00Z", "reason": "Started"},
                    {"metadata": {"name": "e1"}, "lastTimestamp": "2026-01-01T10:00:00Z", "reason": "Scheduled"},
                ],
            },
        )
    )

    events = cluster.events_for("team-a", "run-1-node-0-0")

    assert [e["reason"] for e in events] == ["Scheduled", "Started"]
    request = fake_api.requests[0]
    assert request.path == "/api/v1/namespaces/team-a/events"
    assert request.query["fieldSelector"] == "involvedObject.name=run-1-node-0-0"


def test_pod_logs_returns_the_tail_as_text(fake_api, cluster):
    fake_api.reply(Reply(200, "epoch 1 loss 0.9\nepoch 2 loss 0.7\n"))

    logs = cluster.pod_logs("team-a", "run-1-node-0-0", tail_lines=2, container="node")

    assert logs == "epoch 1 loss 0.9\nepoch 2 loss 0.7\n"
    request = fake_api.requests[0]
    assert request.path == "/api/v1/namespaces/team-a/pods/run-1-node-0-0/log"
    assert request.query == {"tailLines": "2", "container": "node"}


def test_pod_logs_of_a_container_not_started_yet_says_so(fake_api, cluster):
    fake_api.reply(error(400, "BadRequest", 'container "node" in pod "p" is waiting to start: ContainerCreating'))

    with pytest.raises(Invalid, match="waiting to start"):
        cluster.pod_logs("team-a", "p")


# -- check ---------------------------------------------------------------------------


def discovery(*plurals: str) -> Reply:
    return Reply(200, {"kind": "APIResourceList", "resources": [{"name": p} for p in plurals]})


def test_check_reports_the_version_and_names_the_missing_kinds(fake_api, cluster):
    def answer(request):
        documents = {
            "/version": Reply(200, {"gitVersion": "v1.34.1"}),
            "/apis/kubeflow.org/v1": discovery("notebooks", "notebooks/status"),
            "/apis/trainer.kubeflow.org/v1alpha1": discovery("trainjobs", "clustertrainingruntimes"),
            "/apis/serving.kserve.io/v1beta1": discovery("inferenceservices"),
            "/apis/batch.volcano.sh/v1alpha1": discovery("jobs"),
            "/apis/scheduling.volcano.sh/v1beta1": discovery("podgroups"),
        }
        return documents.get(request.path) or error(404, "NotFound", "the server could not find the requested resource")

    fake_api.fallback = answer

    result = cluster.check()

    assert result.reachable and result.server_version == "v1.34.1"
    assert [k.kind for k in result.missing_required] == ["Queue"]
    assert {k.kind for k in result.missing_optional} == {
        "ResourceClaimTemplate",
        "ResourceClaim",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "Workload",
    }
    assert not result.ok
    # One discovery document per group version, not one per kind.
    paths = [r.path for r in fake_api.requests]
    assert len(paths) == len(set(paths))


def test_check_of_an_unreachable_cluster_keeps_the_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cluster = Cluster(ApiClient(Configuration(host=f"http://127.0.0.1:{port}")), request_timeout=1)

    result = cluster.check()

    assert not result.reachable and not result.ok
    assert "refused" in result.error.lower()


def test_from_settings_reads_the_kubeconfig_context_and_timeout(fake_api, settings, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters:
- name: right
  cluster: {{server: "{fake_api.url}"}}
- name: wrong
  cluster: {{server: "http://127.0.0.1:1"}}
users:
- name: portal
  user: {{token: secret-token}}
contexts:
- name: portal
  context: {{cluster: right, user: portal}}
- name: other
  context: {{cluster: wrong, user: portal}}
current-context: other
"""
    )
    settings.KUBE_CONFIG = str(kubeconfig)
    settings.KUBE_CONTEXT = "portal"
    settings.KUBE_REQUEST_TIMEOUT = 3
    fake_api.reply(Reply(200, {"gitVersion": "v1.34.1"}))

    with Cluster.from_settings() as cluster:
        assert cluster.url == fake_api.url
        assert cluster._timeout == 3
        assert cluster._api.configuration.retries is False
        assert cluster.check().server_version == "v1.34.1"

    assert fake_api.requests[0].headers["authorization"] == "Bearer secret-token"


def test_from_settings_with_a_missing_kubeconfig_is_improperly_configured(settings, tmp_path):
    from django.core.exceptions import ImproperlyConfigured

    settings.KUBE_CONFIG = str(tmp_path / "absent")
    settings.KUBE_CONTEXT = ""

    with pytest.raises(ImproperlyConfigured, match="absent"):
        Cluster.from_settings()


def test_from_settings_in_cluster_uses_the_service_account(settings, monkeypatch):
    from kubernetes import config as kube_config

    loaded = []

    def load_incluster_config(client_configuration):
        client_configuration.host = "https://10.0.0.1:443"
        loaded.append(client_configuration)

    monkeypatch.setattr(kube_config, "load_incluster_config", load_incluster_config)
    settings.KUBE_CONFIG = "in-cluster"

    cluster = Cluster.from_settings()

    assert cluster.url == "https://10.0.0.1:443"
    assert loaded[0].retries is False


def test_events_in_the_same_second_keep_the_order_they_were_written(fake_api, cluster):
    same_second = "2026-01-01T10:00:00Z"
    fake_api.reply(
        Reply(
            200,
            {
                "metadata": {"resourceVersion": "30"},
                "items": [
                    {
                        "metadata": {"name": "a", "resourceVersion": "12"},
                        "lastTimestamp": same_second,
                        "reason": "Started",
                    },
                    {
                        "metadata": {"name": "b", "resourceVersion": "9"},
                        "lastTimestamp": same_second,
                        "reason": "Scheduled",
                    },
                    {
                        "metadata": {"name": "c", "resourceVersion": "20"},
                        "eventTime": "2026-01-01T09:59:59.500000Z",
                        "reason": "Early",
                    },
                ],
            },
        )
    )

    assert [e["reason"] for e in cluster.events_for("team-a", "p")] == ["Early", "Scheduled", "Started"]
