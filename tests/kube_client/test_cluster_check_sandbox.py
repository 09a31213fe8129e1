"""``manage.py cluster_check`` against a running sandbox, per cluster profile and ``cluster_setup``.

The sandbox seeds the add-ons' configuration from the profile's ``cluster_setup``
(``sandbox/setup_objects.py``): ``recommended`` is what ``portal/scheduler_config.py`` and
``sandbox/gpu_operator.py`` say the portal needs, ``stock`` upstream's shipped defaults. So
the preflight, the docs and the sandbox agree exactly when ``recommended`` reads all ok and
``stock`` shows the findings an operator meets on a freshly installed cluster.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from sandbox.testing import running_sandbox
from tests.conftest import DEMO_PROFILE, REPO_ROOT, SHARED_REFERENCE

KUEUE_PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo-kueue.yaml"
VOLCANO = "ConfigMap volcano-system/volcano-scheduler-configmap"
KUEUE = "ConfigMap kueue-system/kueue-manager-config"
DCGM = "DaemonSet gpu-operator/nvidia-dcgm-exporter"
DCGM_DRA = "DaemonSet gpu-operator/nvidia-dcgm-exporter-dra"
KSERVE = "ConfigMap kserve/inferenceservice-config"
CHECKED = (VOLCANO, KUEUE, DCGM, DCGM_DRA)
STATES = ("ok", "FIX", "NOT FOUND", "UNKNOWN")


def profile_with_setup(source: Path, cluster_setup: str, directory: Path) -> Path:
    text = source.read_text()
    assert "cluster_setup: recommended\n" in text, f"{source} no longer says cluster_setup: recommended"
    path = directory / f"{source.stem}-{cluster_setup}.yaml"
    path.write_text(text.replace("cluster_setup: recommended\n", f"cluster_setup: {cluster_setup}\n"))
    return path


@pytest.fixture(
    scope="module",
    params=[("demo", "recommended"), ("demo", "stock"), ("demo-kueue", "recommended"), ("demo-kueue", "stock")],
    ids=lambda p: "-".join(p),
)
def setup(request, tmp_path_factory) -> Iterator[tuple[str, str, Path, object]]:
    name, cluster_setup = request.param
    source = DEMO_PROFILE if name == "demo" else KUEUE_PROFILE
    profile = profile_with_setup(Path(source), cluster_setup, tmp_path_factory.mktemp("profiles"))
    crd_dir = SHARED_REFERENCE if SHARED_REFERENCE.is_dir() else None
    with running_sandbox(profile, crd_dir=crd_dir) as handle:
        yield name, cluster_setup, profile, handle


def cluster_check(setup, settings) -> dict[str, list[tuple[str, str, str]]]:
    """Run the command against the sandbox: source -> [(state, "setting: detail", fix)]."""
    _, _, profile, sandbox = setup
    settings.KUBE_CONFIG = str(sandbox.kubeconfig_path)
    settings.KUBE_CONTEXT = ""
    settings.CLUSTER_PROFILE = profile
    out = io.StringIO()
    call_command("cluster_check", stdout=out)
    section = out.getvalue().split("add-on configuration (what the portal needs of it):\n", 1)[1]
    findings: dict[str, list[tuple[str, str, str]]] = {}
    last: list[tuple[str, str, str]] | None = None
    pattern = re.compile(r"^  (ok|FIX|NOT FOUND|UNKNOWN)\s+(\S+ \S+)\s{2,}(.*)$")
    for line in section.splitlines():
        if line.strip().startswith("fix: ") and last:
            state, text, _ = last[-1]
            last[-1] = (state, text, line.strip().removeprefix("fix: "))
            continue
        match = pattern.match(line)
        if match:
            last = findings.setdefault(match.group(2), [])
            last.append((match.group(1), match.group(3), ""))
    return findings


def settings_of(findings: list[tuple[str, str, str]]) -> dict[str, tuple[str, str, str]]:
    return {text.split(": ", 1)[0]: (state, text, fix) for state, text, fix in findings}


def test_the_sandbox_seeds_what_cluster_check_asks_for_or_upstreams_defaults(setup, settings):
    name, cluster_setup, _, _ = setup
    findings = cluster_check(setup, settings)
    for source in (VOLCANO, KUEUE, DCGM):
        assert findings.get(source), (source, sorted(findings))
    if cluster_setup == "recommended":
        attention = {s: [f for f in findings.get(s, []) if f[0] != "ok"] for s in CHECKED}
        assert attention == {s: [] for s in CHECKED}
        # Every other source too (KServe, its storage initializer, Knative's flags).
        assert [(s, f) for s, found in findings.items() for f in found if f[0] != "ok"] == []
        # Both kinds of offering: the DRA nodes' exporter is checked, and found right.
        assert {f[1].split(":")[0] for f in findings[DCGM_DRA]} == {
            "DCGM_EXPORTER_KUBERNETES",
            "KUBERNETES_ENABLE_DRA",
            "KUBERNETES_VIRTUAL_GPUS",
            "nodes",
        }
        return
    kserve = settings_of(findings[KSERVE])
    storage = kserve["storageInitializer (securityContext)"]
    assert storage[0] == "FIX" and "restricted Pod Security Standard" in storage[1]
    assert "ClusterStorageContainer 'default' spec.container.securityContext" in storage[2]
    dcgm = settings_of(findings[DCGM])
    assert dcgm["DCGM_EXPORTER_KUBERNETES"][0] == "ok"
    assert dcgm["KUBERNETES_VIRTUAL_GPUS"][0] == "FIX"
    assert dcgm["KUBERNETES_VIRTUAL_GPUS"][2].endswith("KUBERNETES_VIRTUAL_GPUS=true")
    ((state, text, fix),) = findings[DCGM_DRA]
    assert state == "NOT FOUND" and "one exporter cannot attribute both" in text
    if name == "demo":
        volcano = settings_of(findings[VOLCANO])
        assert volcano["actions"][0] == "FIX" and "missing preempt" in volcano["actions"][1]
        assert "reclaim (" in volcano["actions"][1]
        assert volcano["queue plugin"][0] == "FIX" and "never reads Queue.spec.deserved" in volcano["queue plugin"][1]
        assert volcano["queue plugin"][2].endswith("replace proportion with capacity")
        assert volcano["predicates.predicate.DynamicResourceAllocationEnable"][0] == "FIX"
        assert {f[0] for f in findings[KUEUE]} == {"ok"}  # a Volcano cluster: Kueue not checked
    else:
        kueue = settings_of(findings[KUEUE])
        assert kueue["resources.excludeResourcePrefixes"][0] == "FIX"
        assert kueue["resources.deviceClassMappings gpu.nvidia.com"][0] == "FIX"
        assert kueue["integrations.labelKeysToCopy"][0] == "FIX"
        assert {f[0] for f in findings[VOLCANO]} == {"ok"}  # a Kueue cluster: Volcano not checked
