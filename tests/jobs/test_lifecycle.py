from decimal import Decimal
from unittest import mock

import pytest
from django.http import Http404

from jobs import lifecycle
from jobs.kube.errors import Invalid, Transient
from jobs.kube.status import Observed
from jobs.models import State, Workload
from jobs.specs import SpecError
from quotas.admission import QuotaRefused
from quotas.models import Quota, QuotaException
from tests.jobs.conftest import notebook, training

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_celery():
    """Tasks are enqueued after commit; here we only check that they are."""
    with (
        mock.patch("jobs.tasks.submit_workload.delay") as submit,
        mock.patch("jobs.tasks.teardown_workload.delay") as teardown,
    ):
        yield {"submit": submit, "teardown": teardown}


def used(quota) -> Decimal:
    quota.refresh_from_db()
    return quota.used


def test_a_request_within_quota_is_queued_charged_and_submitted_after_commit(
    cast, quotas, no_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        w = lifecycle.request_workload(cast.alice, cast.vision, training())
    assert w.state == State.QUEUED
    assert w.admission == "guaranteed"
    assert w.priority_class == "gpu-portal-guaranteed"
    assert used(quotas["h100"]) == 2
    no_celery["submit"].assert_called_once_with(w.pk)
    assert [e.to_state for e in w.events.all()] == ["queued"]


def test_burst_above_guaranteed_is_admitted_as_preemptible(cast, quotas):
    lifecycle.request_workload(cast.alice, cast.vision, training("a"))
    w = lifecycle.request_workload(cast.alice, cast.vision, training("b"))
    assert (w.admission, w.priority_class) == ("preemptible", "gpu-portal-preemptible")
    assert used(quotas["h100"]) == 4


def test_a_request_over_the_limit_is_refused_with_the_numbers_and_nothing_saved(cast, quotas):
    lifecycle.request_workload(cast.alice, cast.vision, training("a", replicas=3))
    with pytest.raises(
        QuotaRefused, match="vision has 3 of 4 H100-80GB GPUs in use; this request needs 2 H100-80GB GPUs"
    ):
        lifecycle.request_workload(cast.alice, cast.vision, training("b"))
    assert Workload.objects.count() == 1
    assert used(quotas["h100"]) == 3


def test_seven_mig_slices_fit_in_one_a100_and_the_eighth_does_not(cast, quotas):
    for i in range(7):
        lifecycle.request_workload(cast.alice, cast.vision, notebook(f"nb{i}"))
    assert used(quotas["a100"]) == Decimal("0.999999")
    with pytest.raises(QuotaRefused, match="1 A100-80GB"):
        lifecycle.request_workload(cast.alice, cast.vision, notebook("nb7"))


def test_over_the_limit_with_an_exception_waits_for_approval_uncharged(cast, quotas):
    w = lifecycle.request_workload(
        cast.alice, cast.vision, training(replicas=5), wants_exception=True, reason="deadline"
    )
    assert w.state == State.PENDING_APPROVAL
    assert used(quotas["h100"]) == 0
    exception = QuotaException.objects.get(workload_id=w.pk)
    assert (exception.amount, exception.reason) == (Decimal(5), "deadline")


def test_an_approved_exception_queues_the_workload_and_charges_over_the_limit(cast, quotas, no_celery):
    from quotas.admission import grant_exception
    from quotas.gpu_classes import Charge

    w = lifecycle.request_workload(cast.alice, cast.vision, training(replicas=5), wants_exception=True)
    exception = QuotaException.objects.get(workload_id=w.pk)
    exception.comment = "ok for the deadline"
    grant_exception(cast.vision, Charge("H100-80GB", Decimal(5)))
    assert lifecycle.exception_decided(exception, True, cast.admin)
    w.refresh_from_db()
    assert (w.state, w.admission, w.quota_charge) == (State.QUEUED, "exception", Decimal(5))
    quotas["h100"].refresh_from_db()
    assert (quotas["h100"].used, quotas["h100"].overage) == (Decimal(5), Decimal(1))


def test_a_denied_exception_rejects_the_workload(cast, quotas):
    w = lifecycle.request_workload(cast.alice, cast.vision, training(replicas=5), wants_exception=True)
    exception = QuotaException.objects.get(workload_id=w.pk)
    assert lifecycle.exception_decided(exception, False, cast.admin)
    w.refresh_from_db()
    assert w.state == State.REJECTED
    assert "denied by admin" in w.state_reason


def test_an_invalid_request_names_the_field_and_saves_nothing(cast, quotas):
    with pytest.raises(SpecError) as caught:
        lifecycle.request_workload(cast.alice, cast.vision, training(privileged=True))
    assert "privileged" in caught.value.errors
    assert not Workload.objects.exists()
    assert used(quotas["h100"]) == 0


def test_a_live_name_cannot_be_used_twice_in_a_team(cast, quotas):
    lifecycle.request_workload(cast.alice, cast.vision, notebook("same"))
    with pytest.raises(SpecError) as caught:
        lifecycle.request_workload(cast.carol, cast.vision, notebook("same"))
    assert caught.value.errors == {"name": ["team vision already has a live workload named 'same'"]}


def test_nobody_requests_for_a_team_they_are_not_in(cast, quotas):
    with pytest.raises(Http404):
        lifecycle.request_workload(cast.bob, cast.vision, notebook())


def test_submit_applies_the_team_and_workload_objects_and_is_idempotent(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    assert lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    assert w.state == State.SUBMITTED
    assert "Notebook" in cluster.kinds_applied()
    assert "Namespace" in cluster.kinds_applied()
    assert w.applied_manifests[-1]["kind"] == "Notebook"
    applied = len(cluster.applied)
    assert not lifecycle.submit(w.pk, cluster)  # a retried task does nothing
    assert len(cluster.applied) == applied


def test_a_422_fails_the_workload_with_the_servers_causes_and_releases_quota(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, training())
    cluster.fail_with = Invalid(
        "spec.trainer.numNodes: Invalid value: 0", causes=[("spec.trainer.numNodes", "Invalid value: 0")], status=422
    )
    assert not lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    assert w.state == State.FAILED
    assert "spec.trainer.numNodes: Invalid value: 0" in w.state_reason
    assert used(quotas["h100"]) == 0


def test_a_transient_error_leaves_the_workload_queued_for_the_retry(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, training())
    cluster.fail_with = Transient("503 ServiceUnavailable", status=503)
    with pytest.raises(Transient):
        lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    assert w.state == State.QUEUED
    assert used(quotas["h100"]) == 2


def test_stop_releases_quota_once_even_when_asked_twice(cast, quotas, no_celery, django_capture_on_commit_callbacks):
    w = lifecycle.request_workload(cast.alice, cast.vision, training())
    with django_capture_on_commit_callbacks(execute=True):
        assert lifecycle.stop(cast.alice, w)
    assert not lifecycle.stop(cast.alice, Workload.objects.get(pk=w.pk))
    assert used(quotas["h100"]) == 0
    no_celery["teardown"].assert_called_once_with(w.pk)


def test_a_stop_that_wins_the_race_with_submit_gets_the_applied_objects_torn_down(
    cast, quotas, cluster, no_celery, django_capture_on_commit_callbacks
):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    real_apply = cluster.apply_all

    def apply_then_user_stops(objects):
        result = real_apply(objects)
        if objects and objects[-1]["kind"] == "Notebook":
            lifecycle.stop(cast.alice, Workload.objects.get(pk=w.pk))
        return result

    cluster.apply_all = apply_then_user_stops
    with django_capture_on_commit_callbacks(execute=True):
        assert not lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    assert w.state == State.STOPPED
    assert no_celery["teardown"].call_count >= 1


def test_a_stopped_notebook_starts_again_with_a_fresh_admission(cast, quotas, no_celery):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    lifecycle.stop(cast.alice, w)
    assert lifecycle.start(cast.alice, Workload.objects.get(pk=w.pk))
    w.refresh_from_db()
    assert w.state == State.QUEUED
    assert used(quotas["a100"]) == Decimal("0.142857")


def test_only_notebooks_start_again(cast, quotas):
    w = lifecycle.request_workload(cast.alice, cast.vision, training())
    lifecycle.stop(cast.alice, w)
    with pytest.raises(SpecError):
        lifecycle.start(cast.alice, Workload.objects.get(pk=w.pk))


def test_a_start_over_quota_is_refused_and_leaves_it_stopped(cast, quotas):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook("mine"))
    lifecycle.stop(cast.alice, w)
    for i in range(7):
        lifecycle.request_workload(cast.carol, cast.vision, notebook(f"other{i}"))
    with pytest.raises(QuotaRefused):
        lifecycle.start(cast.alice, Workload.objects.get(pk=w.pk))
    assert Workload.objects.get(pk=w.pk).state == State.STOPPED


def test_observing_pods_running_then_completion_moves_the_state_and_releases_quota(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, training())
    lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    assert lifecycle.observe(w, Observed("running", "All 2 nodes are running."))
    assert w.state == State.RUNNING and w.started_at is not None
    assert not lifecycle.observe(w, Observed("running", "All 2 nodes are running."))  # converged: no change
    assert lifecycle.observe(w, Observed("succeeded", "TrainJob completed"))
    assert w.state == State.SUCCEEDED
    assert used(quotas["h100"]) == 0


def test_a_pending_reason_is_kept_current_without_a_state_change(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, training())
    lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    message = "0/9 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert not lifecycle.observe(w, Observed("pending", message))
    assert Workload.objects.get(pk=w.pk).cluster_message == message


def test_a_workload_past_its_maximum_runtime_is_stopped_with_the_reason(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, training(max_runtime_seconds=3600))
    lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    lifecycle.observe(w, Observed("running"))
    w.refresh_from_db()
    from datetime import timedelta

    assert not lifecycle.enforce_deadline(w, w.started_at + timedelta(minutes=59))
    assert lifecycle.enforce_deadline(w, w.started_at + timedelta(hours=1))
    w.refresh_from_db()
    assert w.state == State.STOPPED
    assert w.state_reason == "Stopped at its maximum runtime of 1 h."


def test_delete_stops_hides_and_tears_down(cast, quotas, no_celery, django_capture_on_commit_callbacks):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.delete(cast.alice, w)
    assert not Workload.objects.visible_to(cast.alice).exists()
    assert Workload.objects.get(pk=w.pk).state == State.STOPPED
    assert used(quotas["a100"]) == 0
    assert no_celery["teardown"].called


def test_teardown_keeps_a_stopped_notebook_with_kubeflows_stop_annotation(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook(workspace_gib=10))
    lifecycle.submit(w.pk, cluster)
    lifecycle.stop(cast.alice, Workload.objects.get(pk=w.pk))
    cluster.applied.clear()
    lifecycle.teardown(w.pk, cluster)
    nb = next(o for o in cluster.applied if o["kind"] == "Notebook")
    assert "kubeflow-resource-stopped" in nb["metadata"]["annotations"]
    assert cluster.deleted == []


def test_teardown_deletes_every_object_of_a_deleted_workload(cast, quotas, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook(workspace_gib=10))
    lifecycle.delete(cast.alice, w)
    lifecycle.teardown(w.pk, cluster)
    assert sorted(kind for _, kind, _, _ in cluster.deleted) == ["Notebook", "PersistentVolumeClaim"]


def test_cpu_work_needs_no_gpu_quota(cast, catalog):
    w = lifecycle.request_workload(
        cast.alice,
        cast.vision,
        {
            "kind": "notebook",
            "name": "cpu-nb",
            "offering": "cpu",
            "gpus_per_replica": 0,
            "image": "quay.io/jupyter/base-notebook:2024-12-02",
        },
    )
    assert (w.state, w.quota_class) == (State.QUEUED, "")
    assert not Quota.objects.exists()


def test_with_the_budget_spent_burst_work_waits_for_approval_but_guaranteed_work_runs(cast, quotas, settings):
    settings.BURST_BUDGET_CHECK = "tests.jobs.test_lifecycle.always_over_budget"
    inside = lifecycle.request_workload(cast.alice, cast.vision, training("a"))  # 2 of 2 guaranteed
    burst = lifecycle.request_workload(cast.alice, cast.vision, training("b"))
    assert (inside.state, burst.state) == (State.QUEUED, State.PENDING_APPROVAL)
    assert "budget" in burst.events.first().message
    assert used(quotas["h100"]) == 2
    assert QuotaException.objects.filter(workload_id=burst.pk).exists()


def always_over_budget(team) -> bool:
    return True
