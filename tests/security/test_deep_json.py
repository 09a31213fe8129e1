"""JSON bodies nested too deeply are a 400 naming the reason, for every caller, never a 500.

Python's json module recurses once per nesting level: 1,000 nested arrays raised
RecursionError in DRF's parser. portal/jsonbody.py sets the limit; the middleware refuses
such a body before authentication and the API's parser refuses it wherever it is reached.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from portal.jsonbody import MAX_DEPTH, depth_over_limit, nesting_depth
from portal.models import ApiToken
from tests.security.routes import all_routes

pytestmark = pytest.mark.django_db

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a":' * 1000 + "1" + "}" * 1000


def api_urls(world) -> list[str]:
    urls = []
    for route in all_routes():
        if route.is_api:
            urls.append(route.raw_url(**{k: next(iter(world.objects[_kind(route, k)].values())) for k in route.kwargs}))
    assert len(urls) > 10, urls
    return urls


def _kind(route, kwarg):
    from tests.security.routes import object_kind

    return object_kind(route, kwarg)


def assert_refused_as_too_deep(response, url):
    assert response.status_code == 400, (url, response.status_code, response.content[:200])
    assert "1000 levels deep" in response.json()["detail"], (url, response.content[:200])


def test_every_api_route_refuses_a_body_nested_1000_deep_for_anonymous_and_signed_in_callers(world):
    anonymous = Client(raise_request_exception=False)
    session = Client(raise_request_exception=False)
    session.force_login(world.cast.admin)
    _, secret = ApiToken.issue(world.cast.alice, "deep")
    bearer = Client(raise_request_exception=False, headers={"Authorization": f"Bearer {secret}"})
    for url in api_urls(world):
        for client in (anonymous, session, bearer):
            for method in ("post", "put", "patch"):
                for body in (DEEP, DEEP_OBJECT):
                    response = getattr(client, method)(url, data=body, content_type="application/json")
                    assert_refused_as_too_deep(response, f"{method} {url}")


def test_a_json_page_post_nested_1000_deep_is_a_plain_400_too(client):
    response = client.post("/login/", data=DEEP, content_type="application/json; charset=utf-8")
    assert response.status_code == 400
    assert b"levels deep" in response.content


def test_the_api_parser_refuses_deep_bodies_without_the_middleware(settings, api, cast, catalog):
    """A view reached without the middleware (or a body it does not see as JSON) still gets a 400, not a 500."""
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != "portal.middleware.RefuseDeepJson"]
    api.force_authenticate(cast.alice)
    for body in (DEEP, DEEP_OBJECT):
        response = api.post("/api/v1/workloads/", data=body, content_type="application/json")
        assert_refused_as_too_deep(response, "POST /api/v1/workloads/")


def test_a_body_at_the_limit_reaches_the_view(api, cast, catalog):
    """The view's own validation answers (the team field), so the body got through the parser."""
    api.force_authenticate(cast.alice)
    deepest = json.loads('{"a":' * (MAX_DEPTH - 1) + "1" + "}" * (MAX_DEPTH - 1))
    nested = {"team": "vision", "annotations": deepest, "args": [[1], [2], [3]]}
    body = json.dumps(nested)
    assert nesting_depth(body.encode()) == MAX_DEPTH
    response = api.post("/api/v1/workloads/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "levels deep" not in response.json()["detail"]


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (b"1", 0),
        (b"[]", 1),
        (b'{"a": [1, {"b": []}]}', 4),
        (b'["' + b"[" * 100 + b'"]', 1),  # brackets inside a string are text
        (b'["\\"' + b"[" * 100 + b'"]', 1),  # ... after an escaped quote too
        (b'[{"k": "\\\\"}, ' + b"[" * 40 + b"]" * 40 + b"]", 41),  # an escaped backslash ends the string
        (b"[" * 40 + b"]" * 40 + b"[[]]", 40),
    ],
)
def test_nesting_depth_counts_arrays_and_objects_not_brackets_in_strings(text, depth):
    assert nesting_depth(text) == depth


def test_only_bodies_deeper_than_the_limit_are_over_it():
    assert depth_over_limit(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) == 0
    assert depth_over_limit(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)) == MAX_DEPTH + 1
    assert depth_over_limit(b"[" + b"[1]," * 1000 + b"[]]") == 0  # many arrays, side by side
