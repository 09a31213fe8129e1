"""Tenant isolation and roles, generated from the URL configuration.

For every route the walk finds (tests/security/routes.py), every method its view
accepts, every caller (anonymous; alice, member of vision; bob, team admin of nlp;
carol, member of both; dora, team admin of nlp and member of vision; admin, platform
admin) and every object its URL (or its ``team`` parameter) can name (vision's, nlp's,
one that does not exist), as a page and as an htmx fragment, the answer must be the one
the access table (tests/security/policy.py) gives:

- another team's object answers exactly like a missing one (404, never 200 or 403);
- anonymous callers get 401 from the API and a redirect to the login page from pages;
- members, team admins and platform admins get what their role allows, 403 otherwise;
- nothing answers 5xx;
- no answer carries a marker of a team the caller is not in, or of another person.

A new route is covered without writing a test: it fails until it has a row in the
access table and, if its URL names a new kind of object, a ``KWARG_OBJECTS`` entry.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from tests.security.conftest import NOTEBOOK_IMAGE, SUBJECTS, call
from tests.security.policy import ACCESS, SSO_OFF, Rule
from tests.security.routes import HTTP_METHODS, Route, all_routes, missing_kwarg_mappings, object_kind

pytestmark = pytest.mark.django_db

ALLOWED = "allowed (past the access check)"
LOGIN = "a redirect to /login/"
MISSING = "(missing)"
HTMX = {"HX-Request": "true"}
# readyz answers 503 when the database or broker is down: that is its contract, not a crash.
MAY_ANSWER_5XX = {"readyz": {503}}
# A caller who passes the access check gets a 2xx or 3xx, except these refusals on the merits
# (the world's notebooks are running, and only a stopped one can be started).
REFUSED_ON_THE_MERITS = {
    ("api:workload-start", "POST"): {409},
    ("api:workload-rollout", "POST"): {400},  # the test workloads are notebooks: only endpoints roll out
    ("api:workload-promote", "POST"): {400},  # ... and only an endpoint with a canary promotes or rolls back
    ("api:workload-rollback", "POST"): {400},
}

NOTEBOOK = {"kind": "notebook", "name": "sec-new", "offering": "a100-80gb-1g.10gb", "image": NOTEBOOK_IMAGE}
QUOTA_ASK = {"gpu_class": "H100-80GB", "limit": "4", "justification": "more GPUs"}  # A100 has a pending one
# Bodies that get past validation, so what is checked is the access decision and not a
# missing field; ``team`` is added for routes whose team comes in the body.
BODIES: dict[tuple[str, str], dict] = {
    ("api:workload-list", "POST"): NOTEBOOK,
    ("api:workload-preview", "POST"): NOTEBOOK,
    ("workload-new", "POST"): {**NOTEBOOK, "action": "create"},
    ("workload-preview", "POST"): NOTEBOOK,
    ("workload-save-preset", "POST"): {"preset_name": "sec-preset"},
    ("api:quota-request-list", "POST"): QUOTA_ASK,
    ("quota-request-create", "POST"): QUOTA_ASK,
    ("api:team-quota", "POST"): {"gpu_class": "A100-80GB", "guaranteed": "1", "limit": "3", "reason": "sec"},
    ("approvals-set-quota", "POST"): {
        "team": "vision",
        "gpu_class": "A100-80GB",
        "guaranteed": "1",
        "limit": "3",
        "reason": "sec",
    },
    ("approvals-decide", "POST"): {"decision": "deny", "comment": "sec"},
}


@dataclass(frozen=True)
class Case:
    route: Route
    method: str
    rule: Rule
    kind: str | None  # what the URL names
    owner: str | None  # whose it is: a team slug, a username, MISSING, or None
    team: str | None  # the team named in the body or query string: a slug, MISSING, or None
    url: str
    data: dict | None
    headers: dict

    def __str__(self) -> str:
        whose = f" [{self.kind} of {self.owner}]" if self.owner else ""
        team = f" [team={self.team}]" if self.team else ""
        htmx = " (htmx)" if self.headers else ""
        return f"{self.method} {self.url}{htmx} {self.route.key}{whose}{team}"


def _body(route: Route, method: str, world) -> dict | None:
    if method in ("GET", "DELETE"):
        return None
    body = dict(BODIES.get((route.key, method), {} if route.is_api else {"confirmed": "yes"}))
    if route.key == "approvals-decide":
        body.update(request=[world.objects["quota_request"]["nlp"]], exception=[])
    return body


def cases(world, routes: list[Route]):
    """Every (route, method, object, team) to call, built from the URLconf and the world's objects."""
    for route in routes:
        for method in sorted(route.methods):
            if method not in ACCESS.get(route.key, {}):
                pytest.fail(f"{route}: no rule for {method}; decide who may call it in tests/security/policy.py")
            rule = ACCESS[route.key][method]
            body = _body(route, method, world)
            targets: list[tuple[str | None, dict]] = [(None, {})]
            kind = None
            if route.kwargs:
                if unmapped := missing_kwarg_mappings([route]):
                    pytest.fail(unmapped[0])
                kinds = {object_kind(route, k) for k in route.kwargs}
                assert len(kinds) == 1, f"{route}: URL arguments of several kinds; teach cases() to combine them"
                kind = kinds.pop()
                if kind not in world.objects:
                    pytest.fail(f"{route}: the `world` fixture (tests/security/conftest.py) has no {kind} per team")
                targets = [
                    (owner, dict.fromkeys(route.kwargs, value))
                    for owner, value in [*world.objects[kind].items(), (MISSING, world.missing(kind))]
                ]
            teams = ["vision", "nlp", MISSING] if rule.team_in else [None]
            variants = [{}, HTMX] if method == "GET" and not route.is_api else [{}]
            for (owner, values), team, headers in itertools.product(targets, teams, variants):
                if owner == MISSING and team not in (None, "vision"):
                    continue  # a missing object is a 404 whatever the team
                url, data = route.url(**values), body
                slug = "no-such-team" if team == MISSING else team
                if rule.team_in == "body":
                    data = {**body, "team": slug}
                elif rule.team_in == "query":
                    url = f"{url}?team={slug}"
                yield Case(route, method, rule, kind, owner, team, url, data, headers)


def _relation(world, user, kind: str | None, owner: str | None) -> str:
    """own, other or none: whether ``user`` may see what the URL (or the team parameter) names."""
    if owner is None:
        return "none"
    if owner == MISSING:
        return "other"
    if kind == "token":
        return "own" if owner == user.username else "other"
    if kind in ("offering", "workload_kind"):
        return "none"  # not a team's
    return "own" if owner in world.teams_of(user) else "other"


def expected(case: Case, world, subject: str):
    rule, user = case.rule, world.user(subject)
    if rule is SSO_OFF:
        return 404
    if rule.who == "public":
        return ALLOWED
    if user is None:
        return 401 if case.route.is_api else LOGIN
    if rule.who == "platform_admin" and not user.is_staff:
        return rule.denied  # refused before any lookup: the same for every object, existing or not
    if _relation(world, user, case.kind, case.owner) == "other":
        return 404
    if _relation(world, user, "team", case.team) == "other":
        return rule.other
    if rule.who == "user" or (rule.who == "platform_admin" and user.is_staff):
        return ALLOWED
    if rule.who == "team_admin":
        team = case.team or (case.owner if case.kind not in (None, "token", "offering", "workload_kind") else None)
        return ALLOWED if world.manages(user, team) else rule.denied
    if rule.who == "platform_admin_of_visible":
        return ALLOWED if user.is_staff else rule.denied
    raise AssertionError(f"unknown rule {rule}")


def satisfies(answer, want, case: Case) -> bool:
    to_login = answer.status in (301, 302) and answer.location.startswith("/login/")
    if want == ALLOWED:
        if case.rule.who == "public":  # the probes, the login page, logout (which sends you to log in)
            crash = answer.status >= 500 and answer.status not in MAY_ANSWER_5XX.get(case.route.key, ())
            return answer.status not in (401, 403, 404, 405) and not crash
        merits = REFUSED_ON_THE_MERITS.get((case.route.key, case.method), set())
        return (200 <= answer.status < 400 and not to_login) or answer.status in merits
    if want == LOGIN:
        return to_login
    return answer.status == want


def problems(case: Case, answer, world, subject: str) -> list[str]:
    found = []
    want = expected(case, world, subject)
    if not satisfies(answer, want, case):
        found.append(f"{subject}: {case} answered {answer.status} {answer.location}, expected {want}")
    if answer.status >= 500 and answer.status not in MAY_ANSWER_5XX.get(case.route.key, ()):
        found.append(f"{subject}: {case} answered {answer.status}: {answer.body[:300]!r}")
    for marker in world.forbidden_markers(world.user(subject)):
        if marker.encode() in answer.body:
            found.append(f"{subject}: {case} shows {marker!r} to someone who may not see it")
    return found


# -- the table and the mappings cover every route -----------------------------------------------


def test_every_route_has_an_access_rule_for_each_method_it_accepts():
    routes = all_routes()
    missing = [
        f"{route}: no rule for {method}; decide who may call it in tests/security/policy.py ACCESS"
        for route in routes
        for method in sorted(route.methods)
        if method not in ACCESS.get(route.key, {})
    ]
    keys = {route.key for route in routes}
    stale = [f"{key}: in ACCESS but no such route (renamed?)" for key in ACCESS if key not in keys]
    assert not missing + stale, "\n".join(missing + stale)


def test_every_url_argument_has_an_object_to_fill_it():
    problems_ = missing_kwarg_mappings(all_routes())
    assert not problems_, "\n".join(problems_)


def test_the_walk_finds_the_pages_and_the_api_of_every_app():
    keys = {route.key for route in all_routes()}
    # One route of each URLconf portal/urls.py includes: a broken include would shrink the walk silently.
    for key in (
        "home",
        "oidc_authentication_init",
        "api:team-list",
        "api:workload-list",
        "api:quota-request-list",
        "api:usage-api",
        "workload-list",
        "quota-overview",
        "usage-dashboard",
    ):
        assert key in keys


# -- the matrix ---------------------------------------------------------------------------------


@pytest.mark.parametrize("subject", SUBJECTS)
def test_every_route_answers_each_caller_as_the_access_table_says(subject, world, clients, portal_on_sandbox):
    """Cluster-reading views (workload detail, live, logs) read the sandbox, as in `make run`."""
    client = clients[subject]
    user = world.user(subject)
    # The control: what the caller may see does show up somewhere, so the leak check is not vacuous.
    visible = set(world.forbidden_markers(None)) - set(world.forbidden_markers(user))
    found, count = [], 0
    for case in cases(world, all_routes()):
        answer = call(client, case.method, case.url, data=case.data, api=case.route.is_api, headers=case.headers)
        found += problems(case, answer, world, subject)
        visible = {marker for marker in visible if marker.encode() not in answer.body}
        count += 1
    assert count > 100
    assert not found, f"{len(found)} of {count} calls went wrong:\n" + "\n".join(found)
    assert not visible, f"{subject} never saw {sorted(visible)}: is the world shown at all?"


def test_methods_a_view_does_not_handle_are_refused_with_405(world, clients, portal_on_sandbox):
    """So the methods read from the views are the real ones, and an unknown verb never reaches a handler."""
    found = []
    for route in all_routes():
        if not route.declared:
            continue  # a function view without a method decorator answers any method
        values = {k: next(iter(world.objects[object_kind(route, k)].values())) for k in route.kwargs}
        # Public routes as anonymous: the login page sends a signed-in user home whatever the method.
        caller = "anonymous" if {r.who for r in ACCESS[route.key].values()} == {"public"} else "admin"
        for method in sorted(set(HTTP_METHODS) - route.methods):
            answer = call(clients[caller], method, route.url(**values), data={}, api=route.is_api)
            if answer.status != 405:
                found.append(f"{method} {route}: {answer.status}, expected 405")
    assert not found, "\n".join(found)


# -- object references outside the URL path ------------------------------------------------------


@pytest.mark.parametrize("subject", ["alice", "bob", "carol", "dora"])
def test_a_team_filter_never_shows_what_the_caller_may_not_see(subject, world, clients):
    """``?team=`` on every GET route without URL arguments: a filter may narrow what one sees, never widen it."""
    found = []
    routes = [r for r in all_routes() if "GET" in r.methods and not r.kwargs and ACCESS[r.key]["GET"].who != "public"]
    for route in routes:
        for team in ("vision", "nlp"):
            url = f"{route.url()}?team={team}"
            answer = call(clients[subject], "GET", url, api=route.is_api)
            case = Case(route, "GET", ACCESS[route.key]["GET"], None, None, team, url, None, {})
            found += [p for p in problems(case, answer, world, subject) if "expected" not in p]
    assert not found, "\n".join(found)


def test_the_request_form_cannot_be_filled_from_another_teams_preset_or_workload(world, clients):
    alice = clients["alice"]
    nlp_preset, nlp_workload = world.objects["preset"]["nlp"], world.objects["workload"]["nlp"]
    own_preset, own_workload = world.objects["preset"]["vision"], world.objects["workload"]["vision"]
    for query in (f"preset={nlp_preset}", f"from={nlp_workload}", "preset=2000000000", "from=2000000000"):
        answer = call(alice, "GET", f"/workloads/new/notebook/?{query}")
        assert answer.status == 404, query
        assert b"leak-nlp-" not in answer.body
    for query in (f"preset={own_preset}", f"from={own_workload}"):
        assert call(alice, "GET", f"/workloads/new/notebook/?{query}").status == 200, query


def test_the_offering_picker_answers_only_for_the_callers_teams(world, clients):
    picker = {"HX-Request": "true", "HX-Target": "offering-picker"}
    assert call(clients["alice"], "GET", "/workloads/new/notebook/?team=vision", headers=picker).status == 200
    for team in ("nlp", "no-such-team"):
        answer = call(clients["alice"], "GET", f"/workloads/new/notebook/?team={team}", headers=picker)
        assert answer.status == 404, team


def test_a_platform_admin_decides_requests_only_by_ids_that_exist(world, clients):
    """The console's form takes ids in the body; a non-admin is refused before they are read."""
    body = {"decision": "approve", "request": [world.objects["quota_request"]["nlp"]], "comment": ""}
    for subject in ("alice", "bob", "carol", "dora"):
        assert call(clients[subject], "POST", "/approvals/decide/", data=body).status == 403
    answer = call(clients["admin"], "POST", "/approvals/decide/", data={**body, "request": [2_000_000_000]})
    assert answer.status == 302


# -- the public routes ---------------------------------------------------------------------------


def test_metrics_need_the_bearer_token_once_one_is_set_and_are_closed_in_production(world, client, settings):
    """/metrics is public in the table because Prometheus has no session; the token is what protects it."""
    settings.PORTAL_METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    answer = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret")
    assert answer.status_code == 200 and b"gpu_portal_workloads" in answer.content
    assert b"leak-" not in answer.content  # counts by team and offering, never names
    settings.PORTAL_METRICS_TOKEN, settings.PRODUCTION = "", True
    assert client.get("/metrics").status_code == 403


def test_the_public_routes_say_nothing_about_teams(world, client):
    for url in ("/healthz", "/readyz", "/api/schema/", "/api/docs/", "/login/", "/metrics"):
        answer = client.get(url)
        assert answer.status_code in (200, 503), url
        assert b"leak-" not in answer.content, url


def test_no_route_crashes_on_a_nul_character(world, clients, portal_on_sandbox):
    """PostgreSQL cannot hold NUL: in a query, a path argument or a form it was a 500 on a dozen routes."""
    found = []
    for route in all_routes():
        real = {k: next(iter(world.objects[object_kind(route, k)].values())) for k in route.kwargs}
        targets = {f"{route.url(**real)}?team=a%00b&page=1%00"}
        if any(isinstance(v, str) for v in real.values()):  # a slug in the path (an <int:pk> refuses NUL itself)
            targets.add(route.raw_url(**{k: f"{v}%00" if isinstance(v, str) else v for k, v in real.items()}))
        for method, target in itertools.product(sorted(route.methods), sorted(targets)):
            data = None if method == "GET" else {"team": "a\x00b", "name": "x\x00", "confirmed": "yes"}
            answer = call(clients["admin"], method, target, data=data, api=route.is_api)
            if answer.status >= 500:
                found.append(f"{method} {target} ({route.key}): {answer.status}")
    assert not found, "\n".join(found)
