"""The checkers are only worth what they catch: each one is shown a broken object here."""

from __future__ import annotations

import copy

import pytest

from jobs.kube.manifests import workload_objects
from tests.kube_schemas import SchemaViolation, requires_reference, to_json_schema, validate_core, validate_custom
from tests.manifests.conftest import spec
from tests.manifests.pss import assert_restricted, restricted_violations


def good_pod() -> dict:
    (notebook,) = workload_objects(spec("notebook"))
    return copy.deepcopy(notebook["spec"]["template"]["spec"])


def test_a_built_pod_has_no_violations():
    assert restricted_violations(good_pod()) == []


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda p: p.update(hostNetwork=True), "hostNetwork must not be true"),
        (lambda p: p.update(hostPID=True), "hostPID must not be true"),
        (lambda p: p.update(hostIPC=True), "hostIPC must not be true"),
        (lambda p: p["volumes"].append({"name": "root", "hostPath": {"path": "/"}}), "hostPath volumes are forbidden"),
        (lambda p: p["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}), "is not allowed"),
        (lambda p: p["containers"][0]["securityContext"].update(privileged=True), "privileged must not be true"),
        (
            lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
            "allowPrivilegeEscalation must be false",
        ),
        (
            lambda p: p["containers"][0]["securityContext"]["capabilities"].update(drop=["NET_RAW"]),
            "capabilities must drop ALL",
        ),
        (
            lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
            "may add only NET_BIND_SERVICE",
        ),
        (lambda p: p["securityContext"].update(runAsUser=0), "runAsUser must not be 0"),
        (lambda p: p["containers"][0]["securityContext"].update(runAsNonRoot=False), "runAsNonRoot must be true"),
        (
            lambda p: (
                p["securityContext"].pop("runAsNonRoot"),
                p["containers"][0]["securityContext"].pop("runAsNonRoot"),
            ),
            "runAsNonRoot must be true",
        ),
        (
            lambda p: p["containers"][0]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
            "seccompProfile.type Unconfined is not allowed",
        ),
        (
            lambda p: (
                p["securityContext"].pop("seccompProfile"),
                p["containers"][0]["securityContext"].pop("seccompProfile"),
            ),
            "seccompProfile must be RuntimeDefault or Localhost",
        ),
        (
            lambda p: p["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
            "sysctl kernel.msgmax is not in the safe set",
        ),
        (
            lambda p: p["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
            "hostPort 80 is forbidden",
        ),
        (lambda p: p["containers"][0]["securityContext"].update(procMount="Unmasked"), "procMount must be Default"),
        (lambda p: p["securityContext"].update(seLinuxOptions={"type": "spc_t"}), "seLinuxOptions.type spc_t"),
        (
            lambda p: p["containers"][0]["securityContext"].update(appArmorProfile={"type": "Unconfined"}),
            "appArmorProfile.type Unconfined",
        ),
        (lambda p: p.update(initContainers=[{"name": "init", "image": "x:1"}]), "initContainers[init]"),
    ],
)
def test_the_restricted_checker_catches_each_violation(breakage, message):
    pod = good_pod()
    breakage(pod)
    with pytest.raises(AssertionError, match="restricted Pod Security Standard") as caught:
        assert_restricted(pod)
    assert message in str(caught.value)


@requires_reference
def test_an_unknown_field_deep_in_a_notebook_is_refused():
    (notebook,) = workload_objects(spec("notebook"))
    notebook["spec"]["template"]["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    with pytest.raises(SchemaViolation, match=r"containers\[0\]\.resources: Additional properties"):
        validate_custom(notebook)


@requires_reference
def test_the_notebook_validation_patches_are_applied():
    (notebook,) = workload_objects(spec("notebook"))
    del notebook["spec"]["template"]["spec"]["containers"][0]["image"]
    with pytest.raises(SchemaViolation, match="'image' is a required property"):
        validate_custom(notebook)
    notebook["spec"]["template"]["spec"]["containers"] = []
    with pytest.raises(SchemaViolation, match="should be non-empty|is too short"):
        validate_custom(notebook)


@requires_reference
def test_a_trainjob_name_is_checked_by_its_cel_rule():
    (job,) = workload_objects(spec("training"))
    job["metadata"]["name"] = "9lives"
    with pytest.raises(SchemaViolation, match="metadata.name must match RFC 1035 DNS label format"):
        validate_custom(job)


@requires_reference
def test_wrong_types_bad_quantities_and_int32_overflows_are_refused():
    (job,) = workload_objects(spec("training"))
    job["spec"]["trainer"]["numNodes"] = 2**31
    job["spec"]["trainer"]["resourcesPerNode"]["limits"]["cpu"] = "lots"
    with pytest.raises(SchemaViolation) as caught:
        validate_custom(job)
    assert "spec.trainer.numNodes" in str(caught.value)
    assert "spec.trainer.resourcesPerNode.limits.cpu" in str(caught.value)


@requires_reference
def test_a_duplicate_entry_in_a_list_map_is_refused():
    (job,) = workload_objects(spec("training", env={"A": "1"}))
    job["spec"]["trainer"]["env"].append({"name": "A", "value": "2"})
    with pytest.raises(SchemaViolation, match="duplicate entry"):
        validate_custom(job)


@requires_reference
def test_a_volcano_job_with_an_unknown_field_is_refused():
    (job,) = workload_objects(spec("training", framework="custom"))
    job["spec"]["tasks"][0]["template"]["spec"]["hostNetworkk"] = True
    with pytest.raises(SchemaViolation, match="hostNetworkk"):
        validate_custom(job)


def test_kubernetes_validate_refuses_an_unknown_field_in_a_core_object():
    (pvc, _) = workload_objects(spec("notebook", workspace_gib=5))
    pvc["spec"]["sizeGiB"] = 5
    with pytest.raises(SchemaViolation, match="sizeGiB"):
        validate_core(pvc)


def test_the_schema_conversion_keeps_free_form_maps_and_closes_structs():
    schema = to_json_schema(
        {
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "blob": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "maybe": {"type": "string", "nullable": True},
                "empty": {"type": "object"},
            },
        }
    )
    assert schema["additionalProperties"] is False
    assert schema["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in schema["properties"]["blob"]
    assert schema["properties"]["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert schema["properties"]["maybe"]["type"] == ["string", "null"]
    assert schema["properties"]["empty"]["additionalProperties"] is False  # the API server would prune its content
