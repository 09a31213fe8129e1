"""Injected faults, as a client under test meets them."""

from __future__ import annotations

import json
import threading
import time

import pytest
import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException


def cm(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def test_an_injected_409_fails_the_next_matching_call_only(sandbox, core):
    sandbox.inject_fault(409, verb="create", kind="configmaps")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", cm("a"))
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    assert core.create_namespaced_config_map("default", cm("a")).metadata.name == "a"


def test_an_injected_422_carries_a_cause(sandbox, core):
    core.create_namespaced_config_map("default", cm("b"))
    sandbox.inject_fault(422, verb="patch", kind="ConfigMap")
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("b", "default", {"data": {"k": "w"}})
    body = json.loads(err.value.body)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.annotations"


def test_an_injected_429_sends_retry_after(sandbox, core):
    sandbox.inject_fault(429, count=2, verb="create", retry_after=3)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map("default", cm("busy"))
        assert err.value.status == 429 and err.value.headers["Retry-After"] == "3"
    core.create_namespaced_config_map("default", cm("busy"))


def test_urllib3_transparently_retries_a_429_on_reads_as_it_would_against_a_real_server(sandbox, core):
    sandbox.inject_fault(429, count=2, verb="list", retry_after=0)
    assert core.list_namespaced_config_map("default").items == []
    assert sandbox.info()["faults"] == []


def test_an_injected_500_is_an_internal_error(sandbox, core):
    sandbox.inject_fault(500, verb="get", kind="namespaces")
    with pytest.raises(ApiException) as err:
        core.read_namespace("default")
    assert err.value.status == 500 and json.loads(err.value.body)["reason"] == "InternalError"


def test_faults_only_match_their_verb_and_kind(sandbox, core):
    sandbox.inject_fault(500, verb="delete", kind="pods")
    core.create_namespaced_config_map("default", cm("c"))
    core.delete_namespaced_config_map("c", "default")
    assert sandbox.info()["faults"][0]["remaining"] == 1
    sandbox.clear_faults()
    assert sandbox.info()["faults"] == []


def test_a_hang_makes_the_client_time_out_while_the_write_still_happens(sandbox, core):
    sandbox.inject_fault(hang_seconds=0.6, verb="create", kind="configmaps")
    started = time.monotonic()
    with pytest.raises((urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.MaxRetryError)):
        core.create_namespaced_config_map("default", cm("slow"), _request_timeout=0.2)
    assert time.monotonic() - started < 0.6
    time.sleep(0.6)
    assert core.read_namespaced_config_map("slow", "default").data == {"k": "v"}


def test_cutting_watches_ends_open_streams(sandbox, core):
    ended = threading.Event()

    def consume():
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=30):
            pass
        ended.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(0.2)
    assert not ended.is_set()
    sandbox.cut_watches()
    assert ended.wait(3)


def test_faults_can_be_injected_over_http(sandbox, core):
    sandbox.control("POST", "faults", {"code": 503, "verb": "list", "kind": "configmaps"})
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("default")
    assert err.value.status == 503
    sandbox.control("POST", "faults", {"code": 500, "count": 5})
    assert len(sandbox.control("GET", "faults")["pending"]) == 1
    sandbox.control("DELETE", "faults")
    core.list_namespaced_config_map("default")
