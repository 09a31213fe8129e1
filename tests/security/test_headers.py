"""Security headers on every page, and pages that a strict Content-Security-Policy does not break.

Every GET route from the URLconf walk is fetched as a platform admin (who sees every
page and every section of it), as a full page and as an htmx fragment, and the public
ones anonymously. Each answer must carry:

- a Content-Security-Policy whose script-src has neither 'unsafe-eval' nor
  'unsafe-inline', and frame-ancestors 'none';
- X-Frame-Options: DENY and X-Content-Type-Options: nosniff.

HTML answers must not contain what that policy would block: an inline ``<script>``
(one without src), a ``<style>`` element, a ``style=`` attribute, an inline event
handler (``onclick=``), a ``javascript:`` URL, htmx's ``hx-on`` (evaluated with eval)
or ``hx-vals``/``hx-headers`` starting with ``js:``.

The exception, documented in portal/middleware.py: /api/docs/ (Swagger UI bootstraps
itself with an inline script and styles) gets its own policy with 'unsafe-inline' for
scripts and styles, still without 'unsafe-eval', and its HTML is not checked.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.security.conftest import call
from tests.security.policy import ACCESS
from tests.security.routes import all_routes, object_kind

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
RELAXED = ("/api/docs/",)


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for part in policy.split(";"):
        words = part.split()
        if words:
            parsed[words[0].lower()] = [w.lower() for w in words[1:]]
    return parsed


def header_problems(where: str, url: str, headers: dict) -> list[str]:
    headers = {k.lower(): v for k, v in headers.items()}
    found = []
    policy = headers.get("content-security-policy")
    if not policy:
        return [f"{where}: no Content-Security-Policy"]
    rules = directives(policy)
    script_src = rules.get("script-src", rules.get("default-src", []))
    if "'unsafe-eval'" in policy.lower():
        found.append(f"{where}: CSP allows 'unsafe-eval'")
    if "'unsafe-inline'" in script_src and not url.startswith(RELAXED):
        found.append(f"{where}: CSP script-src allows 'unsafe-inline'")
    if rules.get("frame-ancestors") != ["'none'"]:
        found.append(f"{where}: CSP frame-ancestors is not 'none'")
    if headers.get("x-frame-options") != "DENY":
        found.append(f"{where}: X-Frame-Options is {headers.get('x-frame-options')!r}")
    if headers.get("x-content-type-options") != "nosniff":
        found.append(f"{where}: X-Content-Type-Options is {headers.get('x-content-type-options')!r}")
    return found


class InlineCode(HTMLParser):
    """Collects what a policy without 'unsafe-inline' (and without 'unsafe-eval') would block."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._script_without_src = False

    def handle_starttag(self, tag, attrs):
        names = dict(attrs)
        line = self.getpos()[0]
        if tag == "script" and not names.get("src"):
            self._script_without_src = True
            if (names.get("type") or "").lower() not in ("application/json", "application/ld+json"):
                self.found.append(f"line {line}: inline <script>")
        if tag == "style":
            self.found.append(f"line {line}: <style> element")
        for name, value in attrs:
            value = (value or "").strip().lower()
            if name == "style":
                self.found.append(f"line {line}: style= attribute on <{tag}>")
            elif name.startswith("on"):
                self.found.append(f"line {line}: inline event handler {name}= on <{tag}>")
            elif name.startswith(("hx-on", "data-hx-on")):
                self.found.append(f"line {line}: {name} (htmx evaluates it with eval)")
            elif name in ("hx-vals", "hx-headers", "data-hx-vals", "data-hx-headers") and value.startswith("js:"):
                self.found.append(f"line {line}: {name}='js:...' (evaluated)")
            elif name in ("href", "src", "action", "formaction") and value.startswith("javascript:"):
                self.found.append(f"line {line}: javascript: URL in {name}")

    def handle_endtag(self, tag):
        if tag == "script":
            self._script_without_src = False


def inline_code(html: str) -> list[str]:
    parser = InlineCode()
    parser.feed(html)
    return parser.found


def page_calls(world):
    """(caller, url, headers) for every GET route: as admin, full and htmx; public ones also anonymously."""
    for route in all_routes():
        if "GET" not in route.methods:
            continue
        values = {k: world.objects[object_kind(route, k)].get("vision") for k in route.kwargs}
        values = {
            k: v if v is not None else next(iter(world.objects[object_kind(route, k)].values()))
            for k, v in values.items()
        }
        url = route.url(**values)
        for headers in ({}, {"HX-Request": "true"}):
            yield "admin", url, headers, route
        if ACCESS[route.key]["GET"].who == "public":
            yield "anonymous", url, {}, route
    # Refusals are pages too.
    yield "alice", f"/workloads/{world.objects['workload']['nlp']}/", {}, None
    yield "alice", "/approvals/", {}, None
    yield "anonymous", "/api/v1/workloads/", {}, None


def test_every_page_carries_the_security_headers_and_no_inline_code(world, clients, portal_on_sandbox):
    found, html_pages = [], 0
    for caller, url, headers, route in page_calls(world):
        answer = call(clients[caller], "GET", url, headers=headers, api=bool(route and route.is_api))
        where = f"{caller} GET {url}{' (htmx)' if headers else ''}"
        found += header_problems(where, url, answer.headers)
        content_type = {k.lower(): v for k, v in answer.headers.items()}.get("content-type", "")
        if content_type.startswith("text/html") and not url.startswith(RELAXED):
            html_pages += 1
            found += [f"{where}: {problem}" for problem in inline_code(answer.body.decode())]
    assert html_pages >= 30
    assert not found, "\n".join(found)


def test_the_api_docs_policy_is_the_only_relaxed_one_and_still_forbids_eval(world, clients):
    answer = call(clients["alice"], "GET", "/api/docs/")
    assert answer.status == 200
    assert inline_code(answer.body.decode()), "Swagger UI no longer needs inline code: drop the exception"
    rules = directives(answer.headers["Content-Security-Policy"])
    assert "'unsafe-eval'" not in rules["script-src"]
    assert rules["frame-ancestors"] == ["'none'"]


def test_no_template_holds_inline_code():
    """Also the branches a GET as admin does not render (errors, empty states, other roles)."""
    found = []
    for template in sorted(TEMPLATES.rglob("*.html")):
        found += [f"{template.relative_to(TEMPLATES)}: {problem}" for problem in inline_code(template.read_text())]
    assert not found, "\n".join(found)
