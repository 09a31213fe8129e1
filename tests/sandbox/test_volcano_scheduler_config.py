"""The sandbox's Volcano follows the scheduler configuration in its ConfigMap.

The demo cluster has 16 device-plugin H100s (two nodes of 8). Two teams' Queues are the
portal's own (``team_objects``): vision and nlp are each guaranteed 8 (deserved) with a
limit of 16 (capability). nlp borrows the whole cluster first; then vision asks for its
guarantee. Only the ``reclaim`` action (the portal's recommended configuration) gives
it back; upstream's shipped default (``cluster_setup: stock``) keeps vision waiting.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from jobs.kube.manifests import priority_classes, team_objects, workload_objects
from jobs.kube.names import PRIORITY_GUARANTEED, PRIORITY_PREEMPTIBLE
from jobs.specs import TeamRef
from portal.scheduler_config import VOLCANO_CONF_KEY, volcano_scheduler_conf
from sandbox.testing import running_sandbox
from sandbox.volcano_config import BUILTIN, STOCK_CONF, parse
from tests.manifests.conftest import spec

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo.yaml"
CRD_DIR = REPO_ROOT.parent / "shared" / "reference"
START = 1_767_225_600.0
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
CM = ("volcano-scheduler-configmap", "volcano-system")


@pytest.fixture
def stock_profile(tmp_path) -> Path:
    data = yaml.safe_load(PROFILE.read_text())
    data["cluster_setup"] = "stock"
    path = tmp_path / "demo-stock.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# Custom resources are validated against the upstream CRDs when ../shared/reference is present.
VALIDATE = CRD_DIR if CRD_DIR.is_dir() else None


@pytest.fixture
def sandbox():
    with running_sandbox(PROFILE, crd_dir=VALIDATE, start_time=START) as handle:
        yield handle


@pytest.fixture
def stock_sandbox(stock_profile):
    with running_sandbox(stock_profile, crd_dir=VALIDATE, start_time=START) as handle:
        yield handle


class Cluster:
    def __init__(self, handle):
        self.handle = handle
        api = handle.api_client()
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        for pc in priority_classes():
            client.SchedulingV1Api(api).create_priority_class(pc)

    def portal_queue(self, team: str, guaranteed: int, limit: int) -> dict:
        [queue] = [
            o
            for o in team_objects(TeamRef(team, f"team-{team}"), {"nvidia.com/gpu": (guaranteed, limit)})
            if o["kind"] == "Queue"
        ]
        return self.custom.create_cluster_custom_object(*VOLCANO, "queues", queue)

    def queue(self, name: str, **spec) -> None:
        body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}}
        self.custom.create_cluster_custom_object(*VOLCANO, "queues", {**body, "spec": spec})

    def pod(self, name: str, queue: str, gpus: int, priority_class: str = PRIORITY_GUARANTEED) -> None:
        self.core.create_namespaced_pod(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "annotations": {QUEUE_ANNOTATION: queue}},
                "spec": {
                    "schedulerName": "volcano",
                    "priorityClassName": priority_class,
                    "tolerations": [GPU_TOLERATION],
                    "containers": [
                        {"name": "main", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
                    ],
                },
            },
        )

    def phases(self, prefix: str) -> dict[str, str]:
        return {
            p.metadata.name: p.status.phase
            for p in self.core.list_namespaced_pod("default").items
            if p.metadata.name.startswith(prefix)
        }

    def running_gpus(self, prefix: str) -> int:
        return sum(
            int(p.spec.containers[0].resources.limits["nvidia.com/gpu"])
            for p in self.core.list_namespaced_pod("default").items
            if p.metadata.name.startswith(prefix) and p.status.phase == "Running"
        )

    def events(self, name: str, reason: str) -> list:
        items = self.core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items
        return [e for e in items if e.reason == reason]

    def evictions(self) -> list:
        return [e for e in self.core.list_namespaced_event("default").items if e.reason == "Evict"]


def nlp_borrows_the_cluster_then_vision_asks_for_its_guarantee(cluster: Cluster) -> None:
    cluster.portal_queue("vision", guaranteed=8, limit=16)
    cluster.portal_queue("nlp", guaranteed=8, limit=16)
    for i in range(4):
        cluster.pod(f"nlp-{i}", "team-nlp", 4, PRIORITY_PREEMPTIBLE)
        cluster.handle.advance(1)
    assert cluster.running_gpus("nlp-") == 16
    cluster.pod("vision-train", "team-vision", 8)
    cluster.handle.settle()


# -- the configuration in the ConfigMap ----------------------------------------------------------


def test_a_recommended_cluster_is_seeded_with_the_portals_scheduler_config(sandbox):
    cm = client.CoreV1Api(sandbox.api_client()).read_namespaced_config_map(*CM)
    assert cm.data[VOLCANO_CONF_KEY] == volcano_scheduler_conf()
    conf = parse(cm.data[VOLCANO_CONF_KEY])
    assert {"reclaim", "preempt"} <= set(conf.actions) and conf.queue_plugins == ("capacity",)
    assert conf.plugin("gang") and conf.dra


def test_a_stock_cluster_is_seeded_with_upstreams_default_config(stock_sandbox):
    cm = client.CoreV1Api(stock_sandbox.api_client()).read_namespaced_config_map(*CM)
    assert cm.data[VOLCANO_CONF_KEY] == STOCK_CONF
    conf = parse(STOCK_CONF)
    assert conf.actions == ("enqueue", "allocate", "backfill") and conf.queue_plugins == ("proportion",)
    assert not conf.dra


def test_the_stock_config_is_upstreams_shipped_file_verbatim():
    path = CRD_DIR / "volcano" / "scheduler-config" / "volcano-scheduler.conf"
    if not path.is_file():
        pytest.skip(f"upstream reference {path} (../shared/reference from the repo root) is not present")
    assert path.read_text() == STOCK_CONF


def test_a_config_without_actions_is_refused_and_both_queue_plugins_apply_together():
    assert parse('actions: "allocate"\ntiers: [{plugins: [{name: capacity}, {name: proportion}]}]').queue_plugins == (
        "capacity",
        "proportion",
    )
    with pytest.raises(ValueError, match="actions"):
        parse("tiers: []")


# -- reclaim -------------------------------------------------------------------------------------


def test_with_the_recommended_config_vision_reclaims_its_guarantee_from_nlps_borrowed_gpus(sandbox):
    cluster = Cluster(sandbox)
    nlp_borrows_the_cluster_then_vision_asks_for_its_guarantee(cluster)

    assert cluster.phases("vision-") == {"vision-train": "Running"}
    # Two of nlp's 4-GPU pods were evicted (both on the node vision now uses, as Volcano frees
    # one node for the task); nlp keeps its deserved 8.
    assert set(cluster.phases("nlp-").values()) == {"Running"} and cluster.running_gpus("nlp-") == 8
    evictions = cluster.evictions()
    assert len(evictions) == 2
    assert {(e.type, e.message) for e in evictions} == {("Warning", "Pod is evicted, because of reclaim")}
    assert {e.involved_object.name for e in evictions}.isdisjoint(cluster.phases("nlp-"))
    queue = cluster.custom.get_cluster_custom_object(*VOLCANO, "queues", "team-nlp")
    assert queue["status"]["allocated"]["nvidia.com/gpu"] == "8"


def test_with_the_stock_config_nothing_is_reclaimed_and_vision_waits(stock_sandbox):
    cluster = Cluster(stock_sandbox)
    nlp_borrows_the_cluster_then_vision_asks_for_its_guarantee(cluster)

    assert cluster.phases("vision-") == {"vision-train": "Pending"}
    assert cluster.running_gpus("nlp-") == 16
    assert cluster.evictions() == []
    [failed] = cluster.events("vision-train", "FailedScheduling")
    assert "Insufficient nvidia.com/gpu" in failed.message


def test_removing_the_configmap_falls_back_to_volcanos_built_in_default_without_reclaim(sandbox):
    assert not BUILTIN.action("reclaim")
    client.CoreV1Api(sandbox.api_client()).delete_namespaced_config_map(*CM)
    cluster = Cluster(sandbox)
    nlp_borrows_the_cluster_then_vision_asks_for_its_guarantee(cluster)
    assert cluster.phases("vision-") == {"vision-train": "Pending"}
    assert cluster.evictions() == []


def test_adding_reclaim_to_the_stock_config_through_the_api_makes_the_next_pass_reclaim(stock_sandbox):
    cluster = Cluster(stock_sandbox)
    nlp_borrows_the_cluster_then_vision_asks_for_its_guarantee(cluster)
    assert cluster.phases("vision-") == {"vision-train": "Pending"}

    edited = STOCK_CONF.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, backfill, reclaim"')
    cluster.core.patch_namespaced_config_map(*CM, {"data": {VOLCANO_CONF_KEY: edited}})
    stock_sandbox.settle()
    # proportion's share of 16 GPUs for two busy queues of weight 1 is 8 each.
    assert cluster.phases("vision-") == {"vision-train": "Running"}
    assert cluster.running_gpus("nlp-") == 8


def test_borrowed_work_at_the_preemptible_class_never_reclaims(sandbox):
    cluster = Cluster(sandbox)
    cluster.portal_queue("vision", guaranteed=8, limit=16)
    cluster.portal_queue("nlp", guaranteed=8, limit=16)
    for i in range(4):
        cluster.pod(f"vision-{i}", "team-vision", 4)
        sandbox.advance(1)
    # Within nlp's deserved, but at the class whose preemptionPolicy is Never.
    cluster.pod("nlp-burst", "team-nlp", 4, PRIORITY_PREEMPTIBLE)
    sandbox.settle()
    assert cluster.phases("nlp-") == {"nlp-burst": "Pending"}
    assert cluster.evictions() == []


def test_a_queue_at_or_above_its_deserved_does_not_reclaim(sandbox):
    cluster = Cluster(sandbox)
    cluster.portal_queue("vision", guaranteed=8, limit=16)
    cluster.portal_queue("nlp", guaranteed=8, limit=16)
    for i in range(4):
        cluster.pod(f"nlp-{i}", "team-nlp", 4, PRIORITY_PREEMPTIBLE)
        sandbox.advance(1)
    cluster.pod("vision-a", "team-vision", 8)
    sandbox.settle()
    cluster.pod("vision-b", "team-vision", 4)  # vision holds its deserved 8: nothing more is taken
    sandbox.settle()
    assert cluster.phases("vision-") == {"vision-a": "Running", "vision-b": "Pending"}
    assert cluster.running_gpus("nlp-") == 8


# -- which Queue fields bound a queue --------------------------------------------------------------


def two_queues_with_different_deserved_compete(cluster: Cluster) -> None:
    cluster.queue("big", deserved={"nvidia.com/gpu": "12"}, capability={"nvidia.com/gpu": "16"}, weight=1)
    cluster.queue("small", deserved={"nvidia.com/gpu": "4"}, capability={"nvidia.com/gpu": "16"}, weight=1)
    for i in range(4):
        cluster.pod(f"big-{i}", "big", 4)
        cluster.pod(f"small-{i}", "small", 4)
    cluster.handle.settle()


def test_capacity_shares_by_deserved(sandbox):
    cluster = Cluster(sandbox)
    two_queues_with_different_deserved_compete(cluster)
    assert (cluster.running_gpus("big-"), cluster.running_gpus("small-")) == (12, 4)


def test_proportion_shares_by_weight_and_ignores_deserved(stock_sandbox):
    cluster = Cluster(stock_sandbox)
    two_queues_with_different_deserved_compete(cluster)
    assert (cluster.running_gpus("big-"), cluster.running_gpus("small-")) == (8, 8)
    pending = cluster.core.read_namespaced_pod("big-3", "default")
    [scheduled] = [c for c in pending.status.conditions if c.type == "PodScheduled"]
    assert "deserved 8 (proportion" in scheduled.message


def test_capacity_keeps_a_queues_guarantee_out_of_other_queues_reach(sandbox):
    cluster = Cluster(sandbox)
    cluster.queue("reserved", guarantee={"resource": {"nvidia.com/gpu": "8"}}, deserved={"nvidia.com/gpu": "8"})
    cluster.queue("other", capability={"nvidia.com/gpu": "16"})
    for i in range(4):
        cluster.pod(f"other-{i}", "other", 4)
    sandbox.settle()
    assert cluster.running_gpus("other-") == 8
    pending = cluster.core.read_namespaced_pod("other-3", "default")
    [scheduled] = [c for c in pending.status.conditions if c.type == "PodScheduled"]
    assert "8 left by other queues' guarantee" in scheduled.message


def test_the_readme_shows_the_volcano_config_the_sandbox_seeds():
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"```yaml\n{volcano_scheduler_conf()}```" in readme


def _gang_of_two_waiting_for_a_third(cluster: Cluster) -> None:
    cluster.queue("gangs", capability={"nvidia.com/gpu": "16"})
    cluster.custom.create_namespaced_custom_object(
        *VOLCANO,
        "default",
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "trio"},
            "spec": {"minMember": 3, "queue": "gangs"},
        },
    )
    for i in range(2):
        cluster.pod(f"trio-{i}", "gangs", 1)
        cluster.core.patch_namespaced_pod(
            f"trio-{i}", "default", {"metadata": {"annotations": {"scheduling.k8s.io/group-name": "trio"}}}
        )
    cluster.handle.settle()


def test_with_the_gang_plugin_a_podgroup_waits_for_its_min_member(sandbox):
    cluster = Cluster(sandbox)
    _gang_of_two_waiting_for_a_third(cluster)
    assert set(cluster.phases("trio-").values()) == {"Pending"}


def test_without_the_gang_plugin_a_podgroups_pods_start_one_by_one(sandbox):
    cluster = Cluster(sandbox)
    without_gang = volcano_scheduler_conf().replace("  - name: gang\n    enablePreemptable: false\n", "")
    assert "gang" not in without_gang
    cluster.core.patch_namespaced_config_map(*CM, {"data": {VOLCANO_CONF_KEY: without_gang}})
    _gang_of_two_waiting_for_a_third(cluster)
    assert set(cluster.phases("trio-").values()) == {"Running"}


# -- preempt -------------------------------------------------------------------------------------


def vision_bursts_then_asks_for_guaranteed_work(cluster: Cluster) -> None:
    """nlp holds its deserved 8; vision fills the other 8 with burst work, then submits 8
    GPUs of guaranteed work: its queue has room (16), the nodes do not."""
    cluster.portal_queue("vision", guaranteed=8, limit=16)
    cluster.portal_queue("nlp", guaranteed=8, limit=16)
    cluster.pod("nlp-0", "team-nlp", 8)
    cluster.pod("vision-burst-0", "team-vision", 4, PRIORITY_PREEMPTIBLE)
    cluster.pod("vision-burst-1", "team-vision", 4, PRIORITY_PREEMPTIBLE)
    cluster.handle.settle()
    cluster.pod("vision-guaranteed", "team-vision", 8)
    cluster.handle.settle()


def test_with_the_preempt_action_guaranteed_work_evicts_its_own_teams_burst_work(sandbox):
    cluster = Cluster(sandbox)
    vision_bursts_then_asks_for_guaranteed_work(cluster)
    assert cluster.phases("vision-") == {"vision-guaranteed": "Running"}
    assert cluster.phases("nlp-") == {"nlp-0": "Running"}  # within its deserved: not touched
    assert {e.message for e in cluster.evictions()} == {"Pod is evicted, because of preempt"}
    assert len(cluster.evictions()) == 2


def test_without_the_preempt_action_guaranteed_work_waits_behind_burst_work(sandbox):
    cluster = Cluster(sandbox)
    without_preempt = volcano_scheduler_conf().replace("preempt, ", "")
    assert "preempt" not in without_preempt
    cluster.core.patch_namespaced_config_map(*CM, {"data": {VOLCANO_CONF_KEY: without_preempt}})
    vision_bursts_then_asks_for_guaranteed_work(cluster)
    assert cluster.phases("vision-")["vision-guaranteed"] == "Pending"
    assert cluster.evictions() == []


def test_without_the_enqueue_action_volcano_places_nothing(sandbox):
    cluster = Cluster(sandbox)
    without_enqueue = volcano_scheduler_conf().replace("enqueue, ", "")
    cluster.core.patch_namespaced_config_map(*CM, {"data": {VOLCANO_CONF_KEY: without_enqueue}})
    cluster.queue("idle", capability={"nvidia.com/gpu": "8"})
    cluster.pod("waits", "idle", 1)
    sandbox.settle()
    assert cluster.phases("waits") == {"waits": "Pending"}

    cluster.core.patch_namespaced_config_map(*CM, {"data": {VOLCANO_CONF_KEY: volcano_scheduler_conf()}})
    sandbox.settle()
    assert cluster.phases("waits") == {"waits": "Running"}


# -- DRA -------------------------------------------------------------------------------------------


def a_volcano_pod_claims_a_dra_gpu(cluster: Cluster) -> None:
    cluster.queue("dra", capability={"nvidia.com/gpu": "8"})
    client.ResourceV1Api(cluster.handle.api_client()).create_namespaced_resource_claim_template(
        "default",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
            },
        },
    )
    cluster.core.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "dra-pod", "annotations": {QUEUE_ANNOTATION: "dra"}},
            "spec": {
                "schedulerName": "volcano",
                "tolerations": [GPU_TOLERATION],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "main", "image": "x:1", "resources": {"claims": [{"name": "gpu"}]}}],
            },
        },
    )
    cluster.handle.settle()


def test_with_the_recommended_config_volcano_allocates_a_pods_dra_claim(sandbox):
    cluster = Cluster(sandbox)
    a_volcano_pod_claims_a_dra_gpu(cluster)
    pod = cluster.core.read_namespaced_pod("dra-pod", "default")
    assert pod.status.phase == "Running" and pod.spec.node_name == "h100-dra-0"


def test_with_the_stock_config_volcano_never_places_a_pod_with_dra_claims(stock_sandbox):
    cluster = Cluster(stock_sandbox)
    a_volcano_pod_claims_a_dra_gpu(cluster)
    assert cluster.phases("dra-pod") == {"dra-pod": "Pending"}
    [failed] = cluster.events("dra-pod", "FailedScheduling")
    assert "Volcano's predicates plugin has DRA off" in failed.message


# -- an evicted gang restarts (the portal's PodEvicted -> RestartJob policy) -------------------------


def test_a_reclaimed_volcano_job_restarts_as_a_whole_and_waits_for_its_queue(sandbox):
    cluster = Cluster(sandbox)
    nlp = TeamRef("nlp", "team-nlp")
    for team in (TeamRef("vision", "team-vision"), nlp):
        for obj in team_objects(team, {"nvidia.com/gpu": (8, 16)}):
            cluster.handle.dynamic_client().resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).create(
                body=obj, namespace=obj["metadata"].get("namespace")
            )
    # nlp's 2 x 8 GPU gang fills both H100 nodes, 8 of them borrowed from vision's deserved.
    gang = replace(
        spec("training", name="gang", framework="custom", replicas=2, gpus_per_replica=8),
        team=nlp,
        priority_class=PRIORITY_PREEMPTIBLE,
    )
    job_objects = workload_objects(gang)
    for obj in job_objects:
        cluster.handle.dynamic_client().resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).create(
            body=obj, namespace=obj["metadata"].get("namespace")
        )
    sandbox.settle()
    assert {p.status.phase for p in cluster.core.list_namespaced_pod("team-nlp").items} == {"Running"}

    cluster.pod("vision-train", "team-vision", 8)
    sandbox.settle()

    assert cluster.phases("vision-") == {"vision-train": "Running"}
    nlp_pods = cluster.core.list_namespaced_pod("team-nlp").items
    assert len(nlp_pods) == 2 and {p.status.phase for p in nlp_pods} == {"Pending"}  # the whole gang waits
    actions = [e for e in cluster.core.list_namespaced_event("team-nlp").items if e.reason == "ExecuteAction"]
    assert [e.message for e in actions] == ["Start to execute action RestartJob "]
