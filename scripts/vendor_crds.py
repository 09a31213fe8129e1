"""Copy the CRD schemas the sandbox validates against from the upstream reference data into sandbox/crds/.

    python scripts/vendor_crds.py [--reference ../shared/reference]

Why: ``make run`` on a plain clone has no ``../shared/reference``, and without schemas
the sandbox would accept any custom resource, so the portal could ship a TrainJob a
real cluster refuses. The sandbox therefore carries its own copy (sandbox/crds/, see
PROVENANCE.md there). What is kept of each upstream CRD: ``apiVersion``, ``kind``,
``metadata.name`` and, of ``spec``, ``group``, ``names``, ``scope`` and per version
``name``, ``served``, ``storage`` and ``schema.openAPIV3Schema`` with the schemas'
``description`` texts removed (they are most of the bytes and validation never reads
them). The result is written as compact JSON (parsing ~7 MB of YAML takes seconds;
this JSON parses in a fraction of one). Upstream validation patches are copied as
they are. Running it again on the same reference gives the same files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET = REPO_ROOT / "sandbox" / "crds"

# reference path -> (folder in sandbox/crds, source repository, upstream path, ref)
SOURCES: dict[str, tuple[str, str, str]] = {
    "kubeflow-notebooks/kubeflow.org_notebooks.yaml": (
        "kubeflow/notebooks",
        "components/notebook-controller/config/crd/bases/kubeflow.org_notebooks.yaml",
        "v1.11.0",
    ),
    "kubeflow-trainer/trainer.kubeflow.org_trainjobs.yaml": (
        "kubeflow/trainer",
        "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
        "v2.3.0",
    ),
    "kubeflow-trainer/trainer.kubeflow.org_trainingruntimes.yaml": (
        "kubeflow/trainer",
        "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
        "v2.3.0",
    ),
    "kubeflow-trainer/trainer.kubeflow.org_clustertrainingruntimes.yaml": (
        "kubeflow/trainer",
        "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "v2.3.0",
    ),
    "kserve/serving.kserve.io_inferenceservices.yaml": (
        "kserve/kserve",
        "config/crd/full/serving.kserve.io_inferenceservices.yaml",
        "v0.20.0",
    ),
    "kserve/serving.kserve.io_servingruntimes.yaml": (
        "kserve/kserve",
        "config/crd/full/serving.kserve.io_servingruntimes.yaml",
        "v0.20.0",
    ),
    "kserve/serving.kserve.io_clusterservingruntimes.yaml": (
        "kserve/kserve",
        "config/crd/full/serving.kserve.io_clusterservingruntimes.yaml",
        "v0.20.0",
    ),
    "volcano/batch.volcano.sh_jobs.yaml": (
        "volcano-sh/volcano",
        "config/crd/volcano/bases/batch.volcano.sh_jobs.yaml",
        "v1.15.1",
    ),
    "volcano/scheduling.volcano.sh_queues.yaml": (
        "volcano-sh/volcano",
        "config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml",
        "v1.15.1",
    ),
    "volcano/scheduling.volcano.sh_podgroups.yaml": (
        "volcano-sh/volcano",
        "config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml",
        "v1.15.1",
    ),
    "kueue/kueue.x-k8s.io_resourceflavors.yaml": (
        "kubernetes-sigs/kueue",
        "config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml",
        "v0.19.2",
    ),
    "kueue/kueue.x-k8s.io_clusterqueues.yaml": (
        "kubernetes-sigs/kueue",
        "config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml",
        "v0.19.2",
    ),
    "kueue/kueue.x-k8s.io_localqueues.yaml": (
        "kubernetes-sigs/kueue",
        "config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml",
        "v0.19.2",
    ),
    "kueue/kueue.x-k8s.io_workloads.yaml": (
        "kubernetes-sigs/kueue",
        "config/components/crd/bases/kueue.x-k8s.io_workloads.yaml",
        "v0.19.2",
    ),
}
# Copied as they are: upstream kustomize applies this patch to the Notebook CRD.
PATCHES = {
    "kubeflow-notebooks/validation_patches.yaml": (
        "kubeflow/notebooks",
        "components/notebook-controller/config/crd/patches/validation_patches.yaml",
        "v1.11.0",
    ),
}

_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def strip_descriptions(schema: Any) -> Any:
    """A copy of an OpenAPI schema without its ``description`` annotations.

    Walks schema positions only, so a *property* named "description" (a key under
    ``properties``) is kept.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            continue
        if key in ("properties", "patternProperties", "definitions") and isinstance(value, dict):
            out[key] = {name: strip_descriptions(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = strip_descriptions(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [strip_descriptions(sub) for sub in value]
        else:
            out[key] = value
    return out


def trimmed(crd: dict[str, Any]) -> dict[str, Any]:
    spec = crd["spec"]
    return {
        "apiVersion": crd["apiVersion"],
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd["metadata"]["name"]},
        "spec": {
            "group": spec["group"],
            "names": spec["names"],
            "scope": spec["scope"],
            "versions": [
                {
                    "name": v["name"],
                    "served": v.get("served", True),
                    "storage": v.get("storage", False),
                    "schema": {"openAPIV3Schema": strip_descriptions((v.get("schema") or {}).get("openAPIV3Schema"))},
                }
                for v in spec["versions"]
            ],
        },
    }


def vendor(reference: Path, target: Path = TARGET) -> list[Path]:
    written = []
    for rel in SOURCES:
        docs = [d for d in yaml.safe_load_all((reference / rel).read_text()) if isinstance(d, dict)]
        crds = [trimmed(d) for d in docs if d.get("kind") == "CustomResourceDefinition"]
        if len(crds) != 1:
            raise SystemExit(f"{rel}: expected one CustomResourceDefinition, found {len(crds)}")
        out = target / Path(rel).with_suffix(".json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(crds[0], separators=(",", ":"), sort_keys=True) + "\n")
        written.append(out)
    for rel in PATCHES:
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(reference / rel, out)
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=str(REPO_ROOT.parent / "shared" / "reference"))
    args = parser.parse_args(argv)
    reference = Path(args.reference)
    if not reference.is_dir():
        print(f"no reference data at {reference}", file=sys.stderr)
        return 2
    for path in vendor(reference):
        print(f"{path.relative_to(REPO_ROOT)}  {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
