"""The sandbox validates custom resources on a plain clone: the upstream CRD schemas it
ships in sandbox/crds/ are its default, and they are the reference ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from sandbox.kinds import KINDS
from sandbox.schemas import SHIPPED_CRD_DIR, Catalog
from scripts.vendor_crds import SOURCES, strip_descriptions
from tests.sandbox.conftest import CRD_DIR, PROFILE, REPO_ROOT

INVALID_TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "bad-job", "namespace": "default"},
    "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": "two", "gpus": 4}},
}


def test_a_sandbox_without_the_reference_folder_answers_422_to_an_invalid_trainjob(tmp_path):
    """Run from a copy of the repository whose parent has no shared/ folder, as a fresh clone would."""
    clone = tmp_path / "clone" / "gpu-portal"
    skip = shutil.ignore_patterns("__pycache__")
    # portal/ for the cluster profile loader the sandbox shares with the GPU catalog.
    for part in ("sandbox", "portal", "deploy/cluster-profiles"):
        shutil.copytree(REPO_ROOT / part, clone / part, ignore=skip)
    assert not (clone.parent / "shared").exists()
    script = textwrap.dedent(
        f"""
        import json
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from sandbox.testing import running_sandbox

        with running_sandbox("deploy/cluster-profiles/{PROFILE.name}") as sb:
            custom = client.CustomObjectsApi(sb.api_client())
            try:
                custom.create_namespaced_custom_object(
                    "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", {INVALID_TRAINJOB!r}
                )
            except ApiException as exc:
                print(json.dumps({{"code": exc.status, "status": json.loads(exc.body), "info": sb.info()}}))
            else:
                print(json.dumps({{"code": 201, "info": sb.info()}}))
        """
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(clone),
        "SANDBOX_CACHE_DIR": str(tmp_path / "cache"),
    }
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["info"]["crdDir"] == str(clone / "sandbox" / "crds")
    assert answer["code"] == 422
    causes = {c["field"]: c["message"] for c in answer["status"]["details"]["causes"]}
    assert causes["spec.trainer.gpus"] == 'unknown field "spec.trainer.gpus"'
    assert "spec.trainer.numNodes in body must be of type integer" in causes["spec.trainer.numNodes"]


def test_the_sandbox_validates_against_the_shipped_schemas_when_no_folder_is_given(sandbox):
    info = sandbox.info()
    assert info["crdDir"] == str(SHIPPED_CRD_DIR) and info["schemaValidation"] is True


def shipped_catalog() -> Catalog:
    catalog = Catalog(SHIPPED_CRD_DIR)
    catalog.load()
    assert catalog.error is None
    return catalog


def test_every_custom_kind_the_sandbox_serves_has_a_shipped_schema_except_jobset():
    catalog = shipped_catalog()
    missing = [
        f"{k.kind}.{k.group}/{v}"
        for k in KINDS
        if k.custom
        for v in k.versions
        if (k.group, v, k.plural) not in catalog.schemas
    ]
    # No JobSet CRD in the upstream reference data (PROVENANCE.md says so), nor KServe's
    # ClusterStorageContainer (the reference has only its shipped "default" object).
    assert missing == ["ClusterStorageContainer.serving.kserve.io/v1alpha1", "JobSet.jobset.x-k8s.io/v1alpha2"]


def test_the_shipped_notebook_schema_gets_the_upstream_validation_patch():
    schema = shipped_catalog().schemas[("kubeflow.org", "v1", "notebooks")]
    pod = schema["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
    containers = pod["properties"]["containers"]
    assert containers["minItems"] == 1 and containers["items"]["required"] == ["name", "image"]


def test_stripping_descriptions_keeps_a_property_named_description():
    schema = {
        "description": "a queue",
        "type": "object",
        "properties": {"description": {"type": "string", "description": "free text"}},
        "anyOf": [{"description": "x", "required": ["description"]}],
    }
    assert strip_descriptions(schema) == {
        "type": "object",
        "properties": {"description": {"type": "string"}},
        "anyOf": [{"required": ["description"]}],
    }


@pytest.mark.parametrize("reference_file", sorted(SOURCES))
def test_the_shipped_schema_is_the_upstream_one_without_descriptions(reference_file):
    source = CRD_DIR / reference_file
    if not source.is_file():
        pytest.skip(f"upstream reference {source} (../shared/reference from the repo root) is not present")
    upstream = next(
        d for d in yaml.safe_load_all(source.read_text()) if d and d.get("kind") == "CustomResourceDefinition"
    )
    shipped = json.loads((SHIPPED_CRD_DIR / Path(reference_file).with_suffix(".json")).read_text())
    assert shipped["spec"]["group"] == upstream["spec"]["group"]
    assert shipped["spec"]["names"] == upstream["spec"]["names"]
    assert [v["name"] for v in shipped["spec"]["versions"]] == [v["name"] for v in upstream["spec"]["versions"]]
    for mine, theirs in zip(shipped["spec"]["versions"], upstream["spec"]["versions"], strict=True):
        assert mine["schema"]["openAPIV3Schema"] == strip_descriptions(theirs["schema"]["openAPIV3Schema"])


def test_the_shipped_folder_carries_its_provenance_and_licence():
    provenance = (SHIPPED_CRD_DIR / "PROVENANCE.md").read_text()
    for reference_file in SOURCES:
        assert Path(reference_file).with_suffix(".json").as_posix() in provenance
    assert "Apache License, Version 2.0" in " ".join(provenance.split())
    assert "Apache License" in (SHIPPED_CRD_DIR / "LICENSE-Apache-2.0.txt").read_text()
