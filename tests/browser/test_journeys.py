"""The portal in a real browser: what the cast does with it, end to end.

The portal runs on ``live_server``, its tasks on a real Celery worker consuming from Redis, against
a sandbox cluster that runs by itself; a small beat sends the reconcile and the GPU sampling as
Celery beat would. Waits are Playwright's own (auto-wait and ``expect``), each bounded.
"""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from jobs.models import State, Workload
from portal.models import Membership, Team
from quotas.models import Quota, QuotaRequest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:2024-12-02"
MIG_SLICE = "a100-80gb-1g.10gb"
# From request to Running: the worker submits, the sandbox schedules and starts the pod, and a
# reconcile (every second here) observes it. Seconds in practice; the bound is for a slow CI box.
RUNNING_WITHIN_MS = 60_000


def test_alice_requests_a_notebook_on_a_mig_slice_watches_it_run_and_stops_it(
    browser, cast, catalog, beat, live_cluster
):
    Quota.objects.create(team=cast.vision, gpu_class="A100-80GB", guaranteed=1, limit=1)
    page = browser.log_in(cast.alice)
    browser.step(page, "logged-in")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Workloads").click()
    page.get_by_role("link", name="New notebook").click()
    expect(page.get_by_role("heading", name="New notebook")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("explore-mig")
    page.get_by_label("Image").fill(NOTEBOOK_IMAGE)
    picker = page.locator("#offering-picker")
    slice_row = picker.get_by_role("row").filter(has=page.locator(f'input[value="{MIG_SLICE}"]'))
    slice_row.get_by_role("radio").check()
    # workloads.js follows the choice: the row is marked and the estimate names the slice's price.
    expect(slice_row).to_have_class(re.compile(r"\bchosen\b"))
    expect(page.locator("#cost-estimate")).to_contain_text("Estimated cost: $0.40 per hour (1 slice × $0.4000)")
    browser.step(page, "form-filled")

    page.get_by_role("button", name="Request notebook").click()
    expect(page).to_have_url(re.compile(r"/workloads/\d+/$"))
    workload = Workload.objects.get(name="explore-mig")
    assert (workload.team, workload.offering.slug, workload.created_by) == (cast.vision, MIG_SLICE, cast.alice)
    expect(page.get_by_role("heading", name="explore-mig")).to_be_visible()
    browser.step(page, "requested")

    # The live part polls every 3 s; nobody reloads the page.
    live = page.locator("#workload-live")
    expect(live.locator(".status-line .badge")).to_have_text("Running", timeout=RUNNING_WITHIN_MS)
    expect(live.get_by_role("link", name="Open notebook")).to_have_attribute(
        "href", "http://kubeflow.local/notebook/team-vision/explore-mig/"
    )
    timeline = live.locator("ol.timeline .badge")
    expect(timeline).to_have_text(["Queued", "Submitted", "Running"])
    # The Logs and Manifests panels poll too: they leave "No pods yet"/"Nothing applied" by themselves.
    expect(page.locator("#workload-manifests summary")).to_have_text(re.compile(r"^\d+ objects?$"))
    expect(page.locator("#workload-logs pre.log")).to_be_visible(timeout=15_000)
    expect(page.locator("#workload-logs")).to_contain_text("Last 200 lines of explore-mig-0")
    browser.step(page, "running")

    # The usage fragment polls itself every 10 s while the workload is live; the beat samples
    # the sandbox's DCGM metrics every 2 s, so the chart and a cost appear without a reload.
    usage = page.locator(f"#workload-usage-{workload.pk}")
    expect(usage.locator("svg.usage-chart-svg").first).to_be_visible(timeout=30_000)
    expect(usage.get_by_role("img", name="GPU activity")).to_be_visible()
    # A running slice costs something from its first (started) minute: not $0.00.
    expect(usage.locator("dt:text-is('Cost so far') + dd")).to_have_text(re.compile(r"^\$(?!0\.00$)\d+\.\d\d$"))
    expect(usage.locator("dt:text-is('Rate') + dd")).to_have_text("$0.40/h")
    expect(usage.locator("dt:text-is('Mean activity') + dd")).to_have_text(re.compile(r"^\d+ %$"))
    browser.step(page, "usage")

    # Stop asks first (workloads.js: window.confirm); accept it.
    questions: list[str] = []

    def accept(dialog):
        questions.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.locator(".page-head .actions").get_by_role("button", name="Stop").click()
    expect(page.locator(".messages")).to_contain_text("explore-mig is stopping.")
    assert questions == ["Stop explore-mig? Its GPUs are released."]
    expect(page.locator("#workload-live .status-line .badge")).to_have_text("Stopped")
    expect(page.locator(".page-head .actions").get_by_role("button", name="Start")).to_be_visible()
    browser.step(page, "stopped")
    workload.refresh_from_db()
    assert workload.state == State.STOPPED
    assert Quota.objects.get(team=cast.vision, gpu_class="A100-80GB").used == 0, "the slice's quota is released"
    # ...and its GPU in the cluster: the worker's teardown stops the notebook, its pod goes.
    assert _eventually(lambda: _pods(live_cluster, "team-vision") == []), _pods(live_cluster, "team-vision")


def test_bob_asks_for_more_h100s_and_sees_them_once_admin_approves(browser, cast, catalog, worker, live_cluster):
    Quota.objects.create(team=cast.nlp, gpu_class="H100-80GB", guaranteed=1, limit=2)
    bob = browser.log_in(cast.bob)
    bob.get_by_role("navigation", name="Main").get_by_role("link", name="Quotas").click()
    card = bob.locator("#team-nlp")
    expect(_quota_cell(card, "H100-80GB", "Limit")).to_have_text("2")
    browser.step(bob, "quotas-before")

    card.get_by_text("Request more (or less) quota for nlp").click()
    card.get_by_label("GPU class").select_option("H100-80GB")
    card.get_by_label("New limit").fill("4")
    card.get_by_label("What are the GPUs for?").fill("Fine-tuning the 70B model before the March release.")
    browser.step(bob, "request-filled")
    card.get_by_role("button", name="File the request").click()
    # htmx swaps the card in place: a message, the request in its table, the pending note on the bar.
    expect(card.locator(".messages")).to_contain_text("filed; the platform admins will decide it.")
    quota_request = QuotaRequest.objects.get(team=cast.nlp)
    assert (quota_request.gpu_class, quota_request.limit, quota_request.requested_by) == ("H100-80GB", 4, cast.bob)
    expect(_request_row(card, quota_request.pk)).to_contain_text("Pending")
    expect(_quota_cell(card, "H100-80GB", "Notes")).to_contain_text(f"Request #{quota_request.pk} pending: limit 4")
    expect(_quota_cell(card, "H100-80GB", "Limit")).to_have_text("2")
    browser.step(bob, "request-filed")

    admin = browser.log_in(cast.admin)
    admin.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals").click()
    pending = admin.locator("#pending")
    expect(pending.get_by_role("heading", name=re.compile("Waiting for a decision"))).to_contain_text("1")
    item = pending.locator("article").filter(has=admin.locator(f"#request-{quota_request.pk}"))
    expect(item).to_contain_text("nlp asks for H100-80GB: limit 4")
    expect(item).to_contain_text("Fine-tuning the 70B model")
    browser.step(admin, "approvals-pending")
    item.get_by_role("checkbox").check()
    admin.get_by_label("Comment (sent to each requester)").fill("Approved for the release.")
    admin.get_by_role("button", name="Approve the ticked ones").click()
    # htmx replaces #pending with the result.
    expect(pending).to_contain_text(f"Decided: request #{quota_request.pk} (nlp, H100-80GB).")
    expect(pending).to_contain_text("Nothing is waiting for a decision.")
    browser.step(admin, "approved")

    bob.reload()
    expect(_quota_cell(card, "H100-80GB", "Limit")).to_have_text("4")
    expect(_quota_cell(card, "H100-80GB", "Guaranteed")).to_have_text("1")
    expect(_request_row(card, quota_request.pk)).to_contain_text("Approved")
    expect(_request_row(card, quota_request.pk)).to_contain_text("Approved by admin")
    expect(_request_row(card, quota_request.pk)).to_contain_text("Approved for the release.")
    browser.step(bob, "quotas-after")
    assert Quota.objects.get(team=cast.nlp, gpu_class="H100-80GB").limit == 4
    # The approval reached the cluster too: the worker applied nlp's hard GPU quota.
    assert _eventually(lambda: _hard_gpu_limit(live_cluster, "team-nlp") == "4"), _hard_gpu_limit(
        live_cluster, "team-nlp"
    )


def test_carol_sees_her_two_teams_everywhere_and_nothing_of_a_third(browser, cast, catalog, no_cluster):
    ops = Team.objects.create(slug="ops", name="Operations")
    dave = get_user_model().objects.create_user("dave", "dave@example.com", "unused-password-1")
    Membership.objects.create(user=dave, team=ops, role=Membership.MEMBER)
    for team in (cast.vision, cast.nlp, ops):
        Quota.objects.create(team=team, gpu_class="A100-80GB", guaranteed=1, limit=2)
    _workload(cast.vision, cast.alice, catalog, "vision-notebook")
    nlp_notebook = _workload(cast.nlp, cast.bob, catalog, "nlp-notebook")
    secret = _workload(ops, dave, catalog, "ops-secret-notebook")

    carol = browser.log_in(cast.carol)
    expect(carol.locator("#team-select option")).to_have_text(["nlp", "vision"])
    browser.step(carol, "home")

    carol.get_by_role("navigation", name="Main").get_by_role("link", name="Workloads").click()
    rows = carol.locator("#workload-table tbody tr")
    expect(rows).to_have_count(2)
    assert sorted(rows.locator("td:first-child").all_inner_texts()) == ["nlp-notebook", "vision-notebook"]
    assert sorted(rows.locator("td:nth-child(3)").all_inner_texts()) == ["nlp", "vision"]
    expect(carol.locator("#filter-team option")).to_have_text(["All my teams", "nlp", "vision"])
    expect(carol.locator("#workload-table")).not_to_contain_text("ops")
    browser.step(carol, "workloads")

    # The list polls itself every 5 s (htmx swaps the table): still the same two after a poll.
    with carol.expect_response(lambda r: "/workloads/" in r.url and r.request.header_value("hx-request") == "true"):
        pass
    expect(rows).to_have_count(2)
    expect(carol.locator("#workload-table")).not_to_contain_text("ops-secret-notebook")

    # Switching the team (portal.js submits the select on change) keeps both and only both.
    carol.locator("#team-select").select_option("vision")
    expect(carol.locator("#team-select")).to_have_value("vision")
    expect(carol.locator("#team-select option")).to_have_text(["nlp", "vision"])
    carol.get_by_role("navigation", name="Main").get_by_role("link", name="Quotas").click()
    expect(carol.locator("main > section.card > h2")).to_have_text(
        [re.compile("Natural Language Processing"), re.compile("Computer Vision")]
    )
    expect(carol.locator("main")).not_to_contain_text("Operations")
    browser.step(carol, "quotas")

    # ops' workload is a 404, as a page and as each fragment; so is ops' usage.
    forbidden = (f"/workloads/{secret.pk}/", f"/workloads/{secret.pk}/logs/", f"/usage/workloads/{secret.pk}/")
    for path in (*forbidden, "/usage/?team=ops"):
        browser.allow_console(r"status of 404 \(Not Found\)", re.escape(path) + "$")
    for path in (*forbidden, "/usage/?team=ops"):
        response = carol.goto(path)
        assert response is not None and response.status == 404, path
        expect(carol.get_by_role("heading", name="Not found")).to_be_visible()
        expect(carol.locator("body")).not_to_contain_text("ops-secret-notebook")
        expect(carol.locator("body")).not_to_contain_text("Operations")
    browser.step(carol, "ops-is-404")

    # A workload of one of her teams does open.
    response = carol.goto(f"/workloads/{nlp_notebook.pk}/")
    assert response is not None and response.status == 200
    expect(carol.get_by_role("heading", name="nlp-notebook")).to_be_visible()
    browser.step(carol, "own-workload")


def _workload(team, user, catalog, name):
    return Workload.objects.create(
        team=team,
        created_by=user,
        kind="notebook",
        name=name,
        offering=catalog[MIG_SLICE],
        image=NOTEBOOK_IMAGE,
        state=State.RUNNING,
    )


# The quota bars' columns (quotas/_bars.html): the class is the row header, the rest are cells.
QUOTA_COLUMNS = ("Usage", "Used", "Guaranteed", "Limit", "Pending", "Free", "Notes")


def _quota_cell(card, gpu_class: str, column: str):
    row = card.locator("table.quota-bars tbody tr").filter(
        has=card.page.get_by_role("rowheader", name=gpu_class, exact=True)
    )
    return row.locator("td").nth(QUOTA_COLUMNS.index(column))


def _request_row(card, pk: int):
    table = card.locator("h3:text-is('Quota requests') + .table-wrap table")
    return table.locator("tbody tr").filter(has=card.page.get_by_role("cell", name=str(pk), exact=True))


def _hard_gpu_limit(sandbox, namespace: str) -> str | None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        quota = client.CoreV1Api(sandbox.api_client()).read_namespaced_resource_quota("gpu-quota", namespace)
    except ApiException:
        return None
    return (quota.spec.hard or {}).get("requests.nvidia.com/gpu")


def _pods(sandbox, namespace: str) -> list[str]:
    from kubernetes import client

    return [p.metadata.name for p in client.CoreV1Api(sandbox.api_client()).list_namespaced_pod(namespace).items]


def _eventually(predicate, timeout: float = 15.0) -> bool:
    """For the cluster side, which no page shows: bounded, like Playwright's own waits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()
