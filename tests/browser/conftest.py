"""Fixtures of the browser tests: Chromium through Playwright, the portal on ``live_server``,
a sandbox cluster that runs by itself, a real Celery worker on Redis, and a small beat.

Every page a test opens is watched: a console error, an uncaught exception or a CSP
violation fails the test (``pytest_runtest_call`` below), because htmx and our scripts
fail quietly otherwise. Each test names its steps (``browser.step(page, "...")``); the
screenshots stay in memory and are written to ``test-artifacts/screenshots/<test>/``
only when the test fails, with one more of every open page at the moment of failure.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cast import PASSWORD
from tests.conftest import DEMO_PROFILE, REPO_ROOT, SHARED_REFERENCE

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SCREENSHOTS = REPO_ROOT / "test-artifacts" / "screenshots"
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# Bounds: a page action or assertion waits at most this long (ms) unless a test says otherwise.
ACTION_TIMEOUT_MS = 15_000


# --- outcome plumbing: console errors fail the call; screenshots need to know the outcome ---------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    watcher = getattr(item, "_browser_watcher", None)
    if watcher is not None and watcher.problems:
        listed = "\n  ".join(watcher.problems)
        raise AssertionError(f"the browser reported {len(watcher.problems)} problem(s):\n  {listed}")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


# --- the browser -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium():
    """One Chromium per test module (module scope: see the note on the asyncio loop)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: install Debian's Chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=ACTION_TIMEOUT_MS)
    # While Playwright's sync API is active, an asyncio loop runs in this thread (the test runs
    # in a greenlet under it), so Django takes every ORM call of the test for one from async
    # code. They are not. Allowed for as long as the browser lives, and no longer, so tests of
    # other modules keep Django's check.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@dataclass
class Watcher:
    """What the pages of one test said that they should not have."""

    problems: list[str] = field(default_factory=list)
    # Console errors a test causes on purpose (a 404 page it opens), as (text, URL) expressions.
    allowed: list[tuple[re.Pattern, re.Pattern]] = field(default_factory=list)

    def console(self, page_name: str, message) -> None:
        if message.type != "error":
            return
        text = message.text
        where = (message.location or {}).get("url", "")
        if any(t.search(text) and u.search(where) for t, u in self.allowed):
            return
        self.problems.append(f"[{page_name}] console error: {text} ({where})")

    def page_error(self, page_name: str, error) -> None:
        self.problems.append(f"[{page_name}] uncaught exception: {error}")

    def csp(self, page_name: str, violation: str) -> None:
        self.problems.append(f"[{page_name}] CSP violation: {violation}")


# Chromium also logs a violation on the console; the DOM event adds the directive, the blocked
# URI and the script line, so a report names the culprit. Init scripts are not subject to the CSP.
CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolation && window.__cspViolation(
    `${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile || e.documentURI}:${e.lineNumber}`
  );
});
"""


def screenshot(page) -> bytes:
    # caret="initial": to hide the caret Playwright leaves style="" on every input, which htmx
    # then copies while settling a swap, and the CSP (rightly) blocks: a violation of our own making.
    return page.screenshot(full_page=True, caret="initial")


class Browsing:
    """Logged-in pages for the cast, each watched, with named steps kept for failure reports."""

    def __init__(self, chromium, base_url: str, node):
        self.chromium = chromium
        self.base_url = base_url
        self.node = node
        self.watcher = Watcher()
        node._browser_watcher = self.watcher
        self.contexts: list = []
        self.pages: dict[str, object] = {}
        self.shots: list[tuple[str, bytes]] = []

    def url(self, path: str) -> str:
        return self.base_url + path

    def allow_console(self, text: str, url: str = "") -> None:
        """A console error this test causes on purpose (e.g. the 404 of a page it must not see)."""
        self.watcher.allowed.append((re.compile(text), re.compile(url)))

    def new_page(self, name: str, viewport: dict | None = None):
        context = self.chromium.new_context(viewport=viewport or LAPTOP, base_url=self.base_url)
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        context.add_init_script(CSP_LISTENER)
        context.expose_function("__cspViolation", lambda text: self.watcher.csp(name, text))
        self.contexts.append(context)
        page = context.new_page()
        page.on("console", lambda message: self.watcher.console(name, message))
        page.on("pageerror", lambda error: self.watcher.page_error(name, error))
        self.pages[name] = page
        return page

    def log_in(self, user, viewport: dict | None = None, name: str | None = None):
        """A new browser (its own cookies) where ``user`` logged in through the login form."""
        from playwright.sync_api import expect

        name = name or user.username
        page = self.new_page(name, viewport)
        page.goto("/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(self.url("/"))
        # textContent, not visibility: on a phone the user box hides behind the menu button.
        expect(page.locator(".userbox a[href='/profile/']")).to_have_text(user.username)
        return page

    def step(self, page, name: str) -> None:
        """Keep a screenshot of this step; it is written out only if the test fails."""
        number = len(self.shots) + 1
        self.shots.append((f"{number:02d}-{name}", screenshot(page)))

    def close(self) -> None:
        report = getattr(self.node, "_report_call", None)
        failed = report is None or report.failed
        if failed:
            for name, page in self.pages.items():
                try:
                    if not page.is_closed():
                        png = screenshot(page)
                        self.shots.append((f"{len(self.shots) + 1:02d}-at-failure-{name}", png))
                except Exception:  # a crashed page: the earlier steps still get written
                    pass
            self.write_shots()
        for context in self.contexts:
            context.close()

    def write_shots(self) -> Path:
        folder = SCREENSHOTS / re.sub(r"[^\w.-]+", "_", self.node.name)
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.png"):
            old.unlink()
        for name, png in self.shots:
            (folder / f"{name}.png").write_bytes(png)
        return folder


@pytest.fixture
def browser(chromium, live_server, request):
    browsing = Browsing(chromium, live_server.url, request.node)
    yield browsing
    browsing.close()


# --- the cluster, the worker and the beat ------------------------------------------------------------


@pytest.fixture
def live_cluster(settings):
    """A sandbox cluster whose controllers and clock run by themselves, as a real one would."""
    from sandbox.testing import running_sandbox

    crd_dir = SHARED_REFERENCE if SHARED_REFERENCE.is_dir() else None
    with running_sandbox(DEMO_PROFILE, crd_dir=crd_dir, seed=11, tick_interval=0.2) as handle:
        settings.KUBE_CONFIG = str(handle.kubeconfig_path)
        settings.KUBE_CONTEXT = ""
        settings.KUBE_REQUEST_TIMEOUT = 5
        yield handle


@pytest.fixture
def no_cluster(settings, tmp_path):
    """Pages that read the cluster say it is not there, instead of reaching a developer's sandbox."""
    settings.KUBE_CONFIG = str(tmp_path / "no-kubeconfig")


@pytest.fixture
def worker(settings):
    """An in-process Celery worker consuming from the real Redis broker (as tests/integration)."""
    from celery.contrib.testing.worker import start_worker

    from portal.celery import app

    app.conf.broker_url = settings.CELERY_BROKER_URL
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()  # no stale tasks from an earlier run
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        yield app


class Beat:
    """Celery beat in miniature: sends the periodic tasks a test needs, on a short period."""

    def __init__(self, app, schedule: dict[str, float]):
        self.app = app
        self.schedule = schedule
        self.stopped = threading.Event()
        self.threads = [
            threading.Thread(target=self._every, args=(name, period), name=f"beat-{name}", daemon=True)
            for name, period in schedule.items()
        ]

    def _every(self, name: str, period: float) -> None:
        while not self.stopped.is_set():
            self.app.send_task(name)
            self.stopped.wait(period)

    def start(self) -> Beat:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=5)


@pytest.fixture
def beat(worker, live_cluster):
    """Reconcile every second and sample the GPUs every two (beat's 10 s and 60 s, sped up)."""
    running = Beat(worker, {"jobs.reconcile": 1.0, "usage.sample_gpus": 2.0}).start()
    yield running
    running.stop()
