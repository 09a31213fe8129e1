"""Starting, stopping, persisting and driving the sandbox from outside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sandbox.testing import running_sandbox

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo.yaml"


def test_it_starts_in_well_under_half_a_second():
    started = time.perf_counter()
    with running_sandbox(PROFILE) as sb:
        elapsed = time.perf_counter() - started
        client.CoreV1Api(sb.api_client()).list_namespace()
    assert elapsed < 0.5


def test_state_survives_a_restart_and_reset_clears_it(tmp_path):
    state = tmp_path / "state.json"
    with running_sandbox(PROFILE, state_path=state) as sb:
        core = client.CoreV1Api(sb.api_client())
        core.create_namespace({"metadata": {"name": "team-keep"}})
        core.create_namespaced_config_map("team-keep", {"metadata": {"name": "kept"}, "data": {"a": "1"}})
        sb.advance(3600)
        clock = sb.now()
        rv = int(core.list_namespace().metadata.resource_version)
    assert state.exists()
    with running_sandbox(PROFILE, state_path=state) as sb:
        core = client.CoreV1Api(sb.api_client())
        assert core.read_namespaced_config_map("kept", "team-keep").data == {"a": "1"}
        assert sb.now() >= clock
        assert int(core.list_namespace().metadata.resource_version) >= rv
        created = core.create_namespaced_config_map("team-keep", {"metadata": {"name": "after"}})
        assert int(created.metadata.resource_version) > rv
    with running_sandbox(PROFILE, state_path=state, reset=True) as sb:
        core = client.CoreV1Api(sb.api_client())
        with pytest.raises(ApiException) as err:
            core.read_namespace("team-keep")
        assert err.value.status == 404


def test_the_clock_and_controllers_can_be_driven_over_http(sandbox):
    before = sandbox.now()
    reply = sandbox.control("POST", "advance", {"seconds": 90})
    assert sandbox.now() == before + 90 and reply["passes"] >= 1
    assert sandbox.control("POST", "settle")["passes"] == 1
    info = sandbox.control("GET", "info")
    assert info["profile"] == "demo" and "a100-mig-0" in info["nodes"]
    assert "NOT a real cluster" in info["simulator"]


def test_the_command_line_serves_and_writes_a_kubeconfig(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "serve",
            "--profile",
            str(PROFILE),
            "--port",
            "0",
            "--state",
            str(tmp_path / "state.json"),
            "--kubeconfig",
            str(kubeconfig),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not kubeconfig.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kubeconfig.exists(), proc.stdout.read() if proc.poll() is not None else "no kubeconfig"
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert server.startswith("http://127.0.0.1:")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        assert "default" in [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=20)[0]
    assert proc.returncode == 0
    assert "serving at http://127.0.0.1:" in output
    assert (tmp_path / "state.json").exists()


def test_it_can_serve_tls_for_clients_that_send_tokens_only_over_https():
    with running_sandbox(PROFILE, tls=True) as sb:
        assert sb.url.startswith("https://127.0.0.1:")
        cluster = yaml.safe_load(sb.kubeconfig_path.read_text())["clusters"][0]["cluster"]
        assert cluster["certificate-authority-data"]
        names = [n.metadata.name for n in client.CoreV1Api(sb.api_client()).list_node().items]
        assert "h100-0" in names
