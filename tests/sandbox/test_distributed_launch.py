"""One torchrun command and one mpirun command run distributed on every training backend.

The portal's own objects (its builders) go into the sandbox through the official client;
the pods the sandbox's controllers create are then read back and their environment is
resolved the way the kubelet resolves it (``tests.sandbox.envref``), so each node's
torchrun sees one consistent set of PET_* variables, and mpirun's ssh arguments name the
workers' sshd port and the keys Volcano's ssh plugin mounted. The sandbox itself fails a
run whose pods could not form one job (``sandbox.podenv``), so a regression in the
builders fails the run here too.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobs.kube.manifests import cluster_objects, main_object_type, team_objects, training_backend, workload_objects
from jobs.specs import TeamRef
from portal.scheduler_config import dra_resource_name
from sandbox.podenv import launch_problem
from sandbox.testing import running_sandbox
from tests.kueue.conftest import H100, KUEUE_PROFILE, VISION, Kube, condition, kueue_spec
from tests.manifests.conftest import spec
from tests.sandbox.conftest import PROFILE, START
from tests.sandbox.envref import container_env, fqdn

TORCHRUN = ["torchrun", "train.py"]
QUOTA = {"cpu": (64, 64), "memory": (512 * 2**30, 512 * 2**30), "nvidia.com/gpu": (16, 16)}


@pytest.fixture
def volcano_k8s():
    with running_sandbox(PROFILE, start_time=START) as handle:
        k = Kube(handle)
        k.apply(*cluster_objects("volcano"), *team_objects(TeamRef("vision", "team-vision"), QUOTA))
        yield k


@pytest.fixture
def kueue_k8s():
    # No CRD validation: this is about pods and their env; tests/kueue covers the schemas.
    with running_sandbox(KUEUE_PROFILE, start_time=START) as handle:
        k = Kube(handle)
        k.apply(*cluster_objects("kueue"))
        # The DRA offering's GPUs count as their DeviceClass (the portal's deviceClassMappings).
        k.team(VISION, {H100.name: {"nvidia.com/gpu": (16, 0), dra_resource_name("gpu.nvidia.com"): (16, 0)}})
        yield k


def training(offering: str, *, framework: str = "torch", replicas: int = 3, kueue: bool = False, **fields: Any):
    fields.setdefault("command", TORCHRUN)
    build = kueue_spec if kueue else spec
    return build(
        "training",
        name="run",
        workload_id=5,
        offering=offering,
        framework=framework,
        replicas=replicas,
        gpus_per_replica=2,
        annotations={"sandbox.local/duration-seconds": "60"},
        **fields,
    )


def job_pods(k8s: Kube) -> list[dict[str, Any]]:
    return [p for p in k8s.pods() if p["metadata"]["name"].startswith("run-")]


def main_object(k8s: Kube, s) -> dict[str, Any]:
    api_version, kind = main_object_type(s)
    return k8s.get(api_version, kind, "run", "team-vision")


def finished(obj: dict[str, Any]) -> str:
    """ "succeeded" or "failed" from the conditions or state of any of the three training kinds."""
    phase = ((obj.get("status") or {}).get("state") or {}).get("phase")
    if phase in ("Completed", "Failed"):
        return {"Completed": "succeeded", "Failed": "failed"}[phase]
    for type_, result in (("Complete", "succeeded"), ("Completed", "succeeded"), ("Failed", "failed")):
        if condition(obj, type_).get("status") == "True":
            return result
    return ""


def launch_warnings(k8s: Kube) -> list[str]:
    return [e["message"] for e in k8s.items("v1", "Event", "team-vision") if e["reason"] == "DistributedLaunchFailed"]


def assert_one_torch_job(pods: list[dict[str, Any]], nodes: int, procs: str) -> None:
    envs = [container_env(p) for p in pods]
    assert len(pods) == nodes
    assert {e["PET_NNODES"] for e in envs} == {str(nodes)}
    assert {e["PET_NPROC_PER_NODE"] for e in envs} == {procs}
    assert sorted(e["PET_NODE_RANK"] for e in envs) == [str(i) for i in range(nodes)]
    assert {e["PET_MASTER_PORT"] for e in envs} == {"29500"}  # Trainer's torch plugin's port
    (rank0,) = [p for p, e in zip(pods, envs, strict=True) if e["PET_NODE_RANK"] == "0"]
    assert {e["PET_MASTER_ADDR"] for e in envs} == {fqdn(rank0)}
    # What torchrun ignores is not set at all: it would only mislead a reader of the pod.
    assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE"} & {k for e in envs for k in e}


@pytest.mark.parametrize(
    ("backend", "offering"),
    [("trainjob", "h100-80gb"), ("volcano", "h100-80gb-dra")],
)
def test_torchrun_on_a_volcano_cluster_sees_one_consistent_set_of_pet_variables(volcano_k8s, backend, offering):
    s = training(offering)
    assert training_backend(s) == backend
    volcano_k8s.apply(*workload_objects(s))
    volcano_k8s.handle.settle()
    pods = job_pods(volcano_k8s)
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    assert_one_torch_job(pods, 3, "2")
    volcano_k8s.handle.advance(90)
    assert finished(main_object(volcano_k8s, s)) == "succeeded"
    assert launch_warnings(volcano_k8s) == []


def test_torchrun_in_a_jobset_on_a_kueue_cluster_sees_the_same_pet_variables(kueue_k8s):
    s = training("h100-80gb-dra", kueue=True)
    assert training_backend(s) == "jobset"
    kueue_k8s.apply(*workload_objects(s))
    kueue_k8s.handle.settle()
    pods = job_pods(kueue_k8s)
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    assert_one_torch_job(pods, 3, "2")
    kueue_k8s.handle.advance(90)
    assert finished(main_object(kueue_k8s, s)) == "succeeded"


def _without_rank(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects as the builders made them before: MASTER_ADDR/RANK, which torchrun ignores."""
    objects = copy.deepcopy(objects)
    main = objects[-1]
    templates = [t["template"] for t in main["spec"].get("tasks") or []] + [
        rj["template"]["spec"]["template"] for rj in main["spec"].get("replicatedJobs") or []
    ]
    for template in templates:
        for c in template["spec"]["containers"]:
            c["env"] = [
                {"name": "MASTER_ADDR", "value": e["value"]} if e["name"] == "PET_MASTER_ADDR" else e
                for e in c["env"]
                if e["name"] != "PET_NODE_RANK"
            ]
    return objects


def test_the_sandbox_fails_a_volcano_torch_run_whose_nodes_have_no_rank(volcano_k8s):
    s = training("h100-80gb-dra")
    volcano_k8s.apply(*_without_rank(workload_objects(s)))
    volcano_k8s.handle.settle()
    assert finished(main_object(volcano_k8s, s)) == "failed"
    assert {p["status"]["phase"] for p in job_pods(volcano_k8s)} == {"Failed"}
    (warning,) = launch_warnings(volcano_k8s)
    assert "PET_NODE_RANK" in warning and "run-node-0" in warning


def test_the_sandbox_fails_a_jobset_torch_run_whose_nodes_have_no_rank(kueue_k8s):
    s = training("h100-80gb-dra", kueue=True)
    kueue_k8s.apply(*_without_rank(workload_objects(s)))
    kueue_k8s.handle.settle()
    assert finished(main_object(kueue_k8s, s)) == "failed"
    (warning,) = launch_warnings(kueue_k8s)
    assert "PET_NODE_RANK" in warning


def _pod(name: str, rank: str, master: str, nnodes: str = "2") -> dict[str, Any]:
    env = {
        "PET_NNODES": nnodes,
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": rank,
        "PET_MASTER_ADDR": master,
        "PET_MASTER_PORT": "29500",
    }
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "hostname": name,
            "subdomain": "job",
            "containers": [{"name": "node", "env": [{"name": k, "value": v} for k, v in env.items()]}],
        },
    }


@pytest.mark.parametrize(
    ("pods", "says"),
    [
        ([_pod("a", "0", "a.job"), _pod("b", "0", "a.job")], "node ranks are 0, 0"),
        ([_pod("a", "0", "b.job"), _pod("b", "1", "b.job")], "not the host name of rank 0"),
        ([_pod("a", "0", "a.job", "3"), _pod("b", "1", "a.job", "3")], "PET_NNODES is 3 but the run has 2 nodes"),
        ([_pod("a", "0", "a.job"), _pod("b", "1", "a.job.ns.svc")], "disagree on PET_MASTER_ADDR"),
    ],
    ids=["duplicate-rank", "master-is-not-rank-0", "wrong-node-count", "different-master"],
)
def test_inconsistent_torch_nodes_are_named_with_the_reason(pods, says):
    assert says in launch_problem(pods)


def test_consistent_torch_nodes_can_start():
    assert (
        launch_problem([_pod("a", "0", "a.job.ns.svc.cluster.local"), _pod("b", "1", "a.job.ns.svc.cluster.local")])
        == ""
    )


# -- MPI -------------------------------------------------------------------------------------

MPIRUN = ["mpirun", "python", "allreduce.py"]


def _launcher_and_workers(k8s: Kube) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pods = job_pods(k8s)
    (launcher,) = [p for p in pods if "-launcher-" in p["metadata"]["name"]]
    workers = sorted((p for p in pods if "-worker-" in p["metadata"]["name"]), key=lambda p: p["metadata"]["name"])
    return launcher, workers


def _ssh_flags(args: str) -> dict[str, str]:
    words = args.split()
    return {w: words[i + 1] for i, w in enumerate(words) if w in ("-p", "-i", "-F")}


def test_mpirun_in_a_volcano_job_dials_the_workers_sshd_port_with_the_plugins_keys(volcano_k8s):
    s = training("h100-80gb", framework="mpi", replicas=2, command=MPIRUN)
    assert training_backend(s) == "volcano"
    volcano_k8s.apply(*workload_objects(s))
    volcano_k8s.handle.settle()
    launcher, workers = _launcher_and_workers(volcano_k8s)
    assert {p["status"]["phase"] for p in [launcher, *workers]} == {"Running"}
    env = container_env(launcher)
    assert env["MPI_HOST"] == ",".join(fqdn(w) for w in workers)  # from Volcano's mpi plugin
    flags = _ssh_flags(env["OMPI_MCA_plm_rsh_args"])
    assert env["PRTE_MCA_plm_ssh_args"] == env["OMPI_MCA_plm_rsh_args"]
    for worker in workers:  # the mpi plugin's --port is what the worker's sshd must listen on
        assert [p["containerPort"] for p in worker["spec"]["containers"][0]["ports"]] == [int(flags["-p"])]
    # The ssh plugin mounted its Secret where the launcher's ssh looks for key and config.
    (mount,) = [m for m in launcher["spec"]["containers"][0]["volumeMounts"] if m["name"] == "run-ssh"]
    assert (flags["-i"], flags["-F"]) == (f"{mount['mountPath']}/id_rsa", f"{mount['mountPath']}/config")
    assert volcano_k8s.get("v1", "Secret", "run-ssh", "team-vision")["data"].keys() >= {"id_rsa", "config"}
    volcano_k8s.handle.advance(90)
    assert finished(main_object(volcano_k8s, s)) == "succeeded"
    assert launch_warnings(volcano_k8s) == []


def _launcher_env(objects: list[dict[str, Any]], change) -> list[dict[str, Any]]:
    objects = copy.deepcopy(objects)
    main = objects[-1]
    if main["kind"] == "Job":
        (task,) = [t for t in main["spec"]["tasks"] if t["name"] == "launcher"]
        container = task["template"]["spec"]["containers"][0]
    else:
        (rj,) = [j for j in main["spec"]["replicatedJobs"] if j["name"] == "launcher"]
        container = rj["template"]["spec"]["template"]["spec"]["containers"][0]
    container["env"] = change(container["env"])
    return objects


def _no_ssh_args(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in env if not e["name"].endswith("_args")]


def test_the_sandbox_fails_an_mpi_run_whose_launcher_dials_port_22(volcano_k8s):
    s = training("h100-80gb", framework="mpi", replicas=2, command=MPIRUN)
    volcano_k8s.apply(*_launcher_env(workload_objects(s), _no_ssh_args))
    volcano_k8s.handle.settle()
    assert finished(main_object(volcano_k8s, s)) == "failed"
    (warning,) = launch_warnings(volcano_k8s)
    assert "connects to ssh port 22" in warning and "listens on 2222" in warning


def test_an_ssh_port_flag_volcanos_ssh_plugin_does_not_know_drops_the_key_path_after_it(volcano_k8s):
    """The ssh plugin defines no ``--ssh-port``: Go's flag parsing stops there, so the key path
    after it is ignored, the keys land in /root/.ssh and the launcher's ``-i`` misses them."""
    s = training("h100-80gb", framework="mpi", replicas=2, command=MPIRUN)
    objects = workload_objects(s)
    plugins = objects[-1]["spec"]["plugins"]
    plugins["ssh"] = ["--ssh-port=2222", *plugins["ssh"]]
    volcano_k8s.apply(*objects)
    volcano_k8s.handle.settle()
    assert finished(main_object(volcano_k8s, s)) == "failed"
    (warning,) = launch_warnings(volcano_k8s)
    assert "/root/.ssh/id_rsa" in warning


def test_mpirun_in_a_jobset_dials_the_port_the_workers_declare(kueue_k8s):
    s = training("h100-80gb", framework="mpi", replicas=2, command=MPIRUN, kueue=True)
    assert training_backend(s) == "jobset"
    kueue_k8s.apply(*workload_objects(s))
    kueue_k8s.handle.settle()
    launcher, workers = _launcher_and_workers(kueue_k8s)
    env = container_env(launcher)
    assert env["MPI_HOST"] == ",".join(fqdn(w) for w in workers)
    port = int(_ssh_flags(env["OMPI_MCA_plm_rsh_args"])["-p"])
    assert {p["containerPort"] for w in workers for p in w["spec"]["containers"][0]["ports"]} == {port}
    kueue_k8s.handle.advance(90)
    assert finished(main_object(kueue_k8s, s)) == "succeeded"
    assert launch_warnings(kueue_k8s) == []


def test_the_sandbox_fails_a_jobset_mpi_run_whose_launcher_dials_port_22(kueue_k8s):
    s = training("h100-80gb", framework="mpi", replicas=2, command=MPIRUN, kueue=True)
    kueue_k8s.apply(*_launcher_env(workload_objects(s), _no_ssh_args))
    kueue_k8s.handle.settle()
    assert finished(main_object(kueue_k8s, s)) == "failed"
    (warning,) = launch_warnings(kueue_k8s)
    assert "connects to ssh port 22" in warning
