"""A screenshot of each main page, on a laptop and on a phone, for people to look at.

Written to ``test-artifacts/screenshots/tour/`` on every run (the other browser tests keep theirs
for failures). The pages are filled the way the portal fills them: workloads requested through
the lifecycle and run by the worker on the sandbox, GPU samples taken by the sampling task, a
quota request waiting in the approvals console. Console errors and CSP violations fail this test
as they fail the others, so it also checks the pages no scenario opens (the usage dashboard).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from jobs import lifecycle
from jobs.models import State, Workload
from portal.notices import notify
from quotas.models import Quota
from quotas.requests import file_request
from tests.browser.conftest import LAPTOP, PHONE, SCREENSHOTS, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOUR = SCREENSHOTS / "tour"
VIEWPORTS = {"laptop": LAPTOP, "phone": PHONE}


def test_a_tour_of_the_main_pages_on_a_laptop_and_a_phone(browser, cast, catalog, beat):
    for team in (cast.vision, cast.nlp):
        Quota.objects.create(team=team, gpu_class="A100-80GB", guaranteed=1, limit=2)
        Quota.objects.create(team=team, gpu_class="H100-80GB", guaranteed=2, limit=4)
    notebook = lifecycle.request_workload(
        cast.alice,
        cast.vision,
        {
            "kind": "notebook",
            "name": "explore-mig",
            "offering": "a100-80gb-1g.10gb",
            "image": "quay.io/jupyter/pytorch-notebook:2024-12-02",
        },
    )
    lifecycle.request_workload(
        cast.alice,
        cast.vision,
        {
            "kind": "training",
            "name": "resnet-ddp",
            "offering": "h100-80gb",
            "framework": "torch",
            "replicas": 2,
            "gpus_per_replica": 1,
            "image": "nvcr.io/nvidia/pytorch:24.10-py3",
            "command": ["torchrun", "train.py"],
        },
    )
    file_request(
        cast.bob, cast.nlp, gpu_class="H100-80GB", limit=8, justification="Fine-tuning the 70B model in March."
    )
    notify(
        cast.alice,
        "Approved: workload 12 may use 1 H100-80GB over quota",
        "admin approved the exception; the workload is queued.",
        "/workloads/",
    )

    TOUR.mkdir(parents=True, exist_ok=True)
    for old in TOUR.glob("*.png"):
        old.unlink()

    for device, viewport in VIEWPORTS.items():
        alice = browser.log_in(cast.alice, viewport=viewport, name=f"alice-{device}")

        alice.goto("/workloads/")
        states = alice.locator("#workload-table tbody .badge.state")
        expect(states).to_have_text(["Running", "Running"], timeout=30_000)
        _shoot(alice, device, "01-workload-list")
        _in_view(states.first, device, "the state on the workload list")

        alice.goto("/workloads/new/notebook/")
        alice.get_by_label("Name", exact=True).fill("another-look")
        alice.locator('input[name="offering"][value="a100-80gb-1g.10gb"]').check()
        expect(alice.locator("#cost-estimate")).to_contain_text("$0.40 per hour")
        _shoot(alice, device, "02-request-form")
        _in_view(alice.locator("#offering-picker th").last, device, "what the team has left, in the picker")

        alice.goto(f"/workloads/{notebook.pk}/")
        expect(alice.locator("#workload-live .status-line .badge")).to_have_text("Running")
        expect(alice.locator(f"#workload-usage-{notebook.pk} svg.usage-chart-svg").first).to_be_visible(timeout=15_000)
        expect(alice.locator("#workload-logs pre")).to_be_visible()
        _shoot(alice, device, "03-workload-running")
        events = alice.locator("#workload-live table")
        _in_view(events.get_by_role("columnheader", name="Message"), device, "the events' messages")

        alice.goto("/quotas/")
        expect(alice.get_by_role("heading", name=re.compile("Computer Vision"))).to_be_visible()
        _shoot(alice, device, "04-quotas")

        alice.goto("/usage/")
        expect(alice.get_by_role("heading", name="Usage of Computer Vision")).to_be_visible()
        _shoot(alice, device, "06-usage-dashboard")

        alice.goto("/notices/")
        expect(alice.locator(".notices-link .badge.unread")).to_have_text("1")
        expect(alice.locator("ul.notices")).to_contain_text("may use 1 H100-80GB over quota")
        _shoot(alice, device, "08-notices")

        admin = browser.log_in(cast.admin, viewport=viewport, name=f"admin-{device}")
        admin.goto("/approvals/")
        expect(admin.locator("#pending")).to_contain_text("nlp asks for H100-80GB: limit 8")
        _shoot(admin, device, "05-approvals-console")

        if device == "phone":
            # The menu button opens the navigation (CSS only: a checkbox and its label).
            alice.goto("/workloads/")
            expect(alice.get_by_role("navigation", name="Main")).to_be_hidden()
            alice.locator("label.nav-toggle-label").click()
            expect(alice.get_by_role("navigation", name="Main").get_by_role("link", name="Quotas")).to_be_visible()
            _shoot(alice, device, "07-menu-open")

    assert Workload.objects.filter(state=State.RUNNING).count() == 2
    assert not SIDEWAYS, f"pages wider than the screen (they scroll sideways as a whole): {SIDEWAYS}"
    assert not HIDDEN, f"scrolled out of sight inside their tables: {HIDDEN}"


# A table may scroll inside its own box (.table-wrap); the page itself must not scroll sideways.
SIDEWAYS: list[str] = []
PAGE_WIDTH = "() => [document.documentElement.scrollWidth, window.innerWidth]"


HIDDEN: list[str] = []
# Whether an element lies within the box that scrolls it sideways (.table-wrap), without scrolling.
WITHIN_ITS_BOX = """el => {
  const box = (el.closest('.table-wrap') || document.documentElement).getBoundingClientRect();
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.left >= box.left - 1 && r.right <= box.right + 1;
}"""


def _in_view(locator, device: str, what: str) -> None:
    if not locator.evaluate(WITHIN_ITS_BOX):
        HIDDEN.append(f"{device}: {what}")


def _shoot(page, device: str, name: str) -> None:
    scroll_width, width = page.evaluate(PAGE_WIDTH)
    if scroll_width > width:
        SIDEWAYS.append(f"{device}-{name}: {scroll_width}px on a {width}px screen")
    (TOUR / f"{device}-{name}.png").write_bytes(screenshot(page))
