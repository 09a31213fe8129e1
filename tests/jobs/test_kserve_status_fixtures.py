"""jobs.kube.status on InferenceService statuses as KServe writes them (tests/fixtures/upstream/kserve,
sources in its SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.kube.status import TrafficShare, derive, traffic_split
from tests.kube_schemas import requires_reference, validate_custom

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / "kserve"
RUNNING_POD = {"status": {"phase": "Running", "startTime": "2023-03-21T19:05:00Z"}}


def isvc(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@requires_reference
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_fixture_fits_the_v0_20_crd_status_included(path):
    obj = json.loads(path.read_text())
    validate_custom({**obj, "spec": obj.get("spec") or {"predictor": {}}})


def test_every_fixture_has_a_source_note():
    notes = (FIXTURES / "SOURCES.md").read_text()
    names = sorted(p.name for p in FIXTURES.glob("*.json"))
    assert names and all(f"`{name}`" in notes for name in names)


def test_a_ready_knative_endpoint_runs_with_its_url_and_all_traffic_on_one_revision():
    seen = derive("InferenceService", isvc("knative-ready"), [RUNNING_POD])
    assert (seen.phase, seen.url) == ("running", "http://pmml-demo.test.example.com")
    assert seen.started_at is not None
    assert seen.traffic == (TrafficShare("stable", 100, "pmml-demo-predictor-default-00001", True),)


def test_a_knative_canary_splits_between_the_latest_and_the_previous_rolled_out_revision():
    assert traffic_split(isvc("knative-canary-tagged")) == (
        TrafficShare("stable", 90, "sklearn-iris-predictor-default-00001", True),
        TrafficShare("canary", 10, "sklearn-iris-predictor-default-00003", True),
    )


def test_a_pinned_rollback_shows_the_canary_at_zero():
    assert traffic_split(isvc("knative-rollback-pinned")) == (
        TrafficShare("stable", 100, "sklearn-iris-predictor-default-00001", True),
        TrafficShare("canary", 0, "sklearn-iris-predictor-default-00002", True),
    )


def test_a_failed_revision_is_pending_with_knatives_words():
    seen = derive("InferenceService", isvc("knative-revision-failed"), [])
    assert seen.phase == "pending"
    assert seen.message.endswith("failed with message: 0/1 nodes are available: 1 Insufficient cpu..")
    assert seen.traffic == ()


def test_a_ready_standard_endpoint_runs_without_revisions():
    seen = derive("InferenceService", isvc("standard-ready"), [RUNNING_POD])
    assert (seen.phase, seen.url) == ("running", "http://sklearn-iris-kserve-test.example.com")
    assert seen.traffic == (TrafficShare("stable", 100, "", True),)  # one Deployment takes everything


def test_an_unavailable_standard_endpoint_says_why_unless_a_pod_says_more():
    status = isvc("standard-unavailable")
    seen = derive("InferenceService", status, [])
    assert seen.message == "Deployment does not have minimum availability."
    assert seen.traffic == (TrafficShare("stable", 100, "", False),)
    unschedulable = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/8 nodes are available"}],
        }
    }
    assert derive("InferenceService", status, [unschedulable]).message == "0/8 nodes are available"


def test_a_standard_canary_gets_its_share_from_canary_statuses():
    assert traffic_split(isvc("standard-canary")) == (
        TrafficShare("stable", 80, "", True),
        TrafficShare("canary", 20, "v2", True),
    )


@pytest.mark.parametrize("name", ["knative-ready", "knative-canary-tagged", "standard-ready", "standard-canary"])
def test_ready_fixtures_are_running(name):
    assert derive("InferenceService", isvc(name), [RUNNING_POD]).phase == "running"
