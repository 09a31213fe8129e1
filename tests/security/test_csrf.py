"""CSRF: every unsafe request of a signed-in browser needs the token; API tokens do not.

The routes come from the URLconf walk (tests/security/routes.py), so a new POST page or
API action is checked without a test of its own. A browser session is what CSRF
attacks ride on, so with a session cookie and no token every POST, PUT, PATCH and DELETE
is refused with 403, pages (Django's middleware) and API (DRF's SessionAuthentication)
alike. A Bearer token is not sent by the browser on its own, so API calls with one need
no CSRF token: that is DRF's behaviour and the test pins it.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from jobs.models import Workload
from quotas.models import QuotaRequest
from tests.security.conftest import NOTEBOOK_IMAGE, call
from tests.security.routes import UNSAFE_METHODS, all_routes, object_kind

pytestmark = pytest.mark.django_db

HX_TOKEN = re.compile(r"""hx-headers='\{"X-CSRFToken": "([^"]+)"\}'""")


def unsafe_calls(world, api: bool | None = None):
    """(method, url, route) for every unsafe method of every route, with vision's objects in the URL."""
    for route in all_routes():
        if api is not None and route.is_api != api:
            continue
        values = {k: world.objects[object_kind(route, k)].get("vision") for k in route.kwargs}
        values = {
            k: v if v is not None else next(iter(world.objects[object_kind(route, k)].values()))
            for k, v in values.items()
        }
        for method in sorted(route.methods & set(UNSAFE_METHODS)):
            yield method, route.url(**values), route


def csrf_client(user=None) -> Client:
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    if user is not None:
        client.force_login(user)
    return client


def test_every_unsafe_request_of_a_session_without_the_token_is_refused(world, portal_on_sandbox):
    """As a platform admin, who passes every access check: only CSRF stands in the way."""
    client = csrf_client(world.cast.admin)
    found, count = [], 0
    for method, url, route in unsafe_calls(world):
        answer = call(client, method, url, data={"confirmed": "yes", "team": "vision"}, api=route.is_api)
        count += 1
        if answer.status != 403 or b"CSRF" not in answer.body:
            found.append(f"{method} {url} ({route.key}): {answer.status} {answer.body[:120]!r}")
    assert count >= 30
    assert not found, f"{len(found)} of {count} unsafe calls went through without a CSRF token:\n" + "\n".join(found)


def test_the_login_form_needs_the_token_too(world):
    """Login CSRF: a site must not be able to sign a victim in to the attacker's account."""
    answer = call(csrf_client(), "POST", "/login/", data={"username": "alice", "password": "test-password-123"})
    assert answer.status == 403 and b"CSRF" in answer.body


def test_api_calls_with_a_bearer_token_need_no_csrf_token(world, portal_on_sandbox):
    client = csrf_client()  # no session at all
    headers = {"Authorization": f"Bearer {world.secrets['admin']}"}
    found, count = [], 0
    for method, url, _ in unsafe_calls(world, api=True):
        answer = call(client, method, url, data={}, api=True, headers=headers)
        count += 1
        if b"CSRF" in answer.body or answer.status in (401, 403):
            found.append(f"{method} {url}: {answer.status} {answer.body[:120]!r}")
    assert count >= 10
    assert not found, "\n".join(found)


def test_an_htmx_post_with_the_pages_token_goes_through(world):
    """bob files a quota request from the overview's card, as the browser does: token from hx-headers."""
    client = csrf_client(world.cast.bob)
    page = client.get("/quotas/")
    token = HX_TOKEN.search(page.content.decode())[1]
    body = {"team": "nlp", "gpu_class": "H100-80GB", "limit": "4", "justification": "fine-tuning"}

    refused = client.post("/quotas/requests/", body, headers={"HX-Request": "true"})
    assert refused.status_code == 403
    response = client.post("/quotas/requests/", body, headers={"HX-Request": "true", "X-CSRFToken": token})
    assert response.status_code == 200
    assert 'id="team-nlp"' in response.content.decode()
    assert QuotaRequest.objects.filter(team=world.cast.nlp, gpu_class="H100-80GB").exists()


def test_a_session_api_call_with_the_token_goes_through(world):
    """The API docs page and htmx use the session: with the token, the API accepts them."""
    client = csrf_client(world.cast.alice)
    token = HX_TOKEN.search(client.get("/workloads/").content.decode())[1]
    body = {"team": "vision", "kind": "notebook", "name": "from-docs", "offering": "a100-80gb-1g.10gb"}
    body["image"] = NOTEBOOK_IMAGE
    assert client.post("/api/v1/workloads/", body, content_type="application/json").status_code == 403
    response = client.post("/api/v1/workloads/", body, content_type="application/json", headers={"X-CSRFToken": token})
    assert response.status_code == 201
    assert Workload.objects.filter(name="from-docs").exists()
