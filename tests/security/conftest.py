"""The world the security tests probe: one object of every kind per team, each carrying a marker.

Every object of team T has ``leak-T-`` in a field the pages and the API show (a name, a
justification, a reason), and every object of user U (API tokens, notices) has
``leak-U-``. A response to someone who may not see T (or is not U) must never contain
that marker, whatever the route: that is the "never their data in the body" check.

Audit entries also carry ``admins-of-T-only``: only T's team admins (and platform admins)
read them, so members of T must not see that marker either.

People: the cast (tests/cast.py) plus
- vera, team admin of vision, who files vision's quota request so that a platform admin
  may decide it (nobody decides their own request); she never calls anything here;
- dora, team admin of nlp and member of vision: a role is per team, so she manages nlp's
  presets, requests and audit log, and none of vision's.

Each request of the generated tests runs in a savepoint that is rolled back, so a DELETE
or an approval by one caller does not change what the next caller sees. Nothing is
committed, so nothing queued with ``transaction.on_commit`` (Celery tasks, emails) is sent.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:2024-12-02"
MISSING_ID = 2_000_000_000
SUBJECTS = ("anonymous", "alice", "bob", "carol", "dora", "admin")


def pytest_configure(config):
    config.addinivalue_line("markers", "openapi_fuzz: generated API calls checked against the OpenAPI schema")


@pytest.fixture(autouse=True)
def no_rate_limit(monkeypatch):
    """The generated tests make hundreds of calls per user in seconds; the limit has its own tests."""
    monkeypatch.setattr("portal.throttling.ApiRateThrottle.allow_request", lambda self, request, view: True)


@dataclass
class World:
    cast: object
    vera: object
    dora: object
    # kind -> owner (team slug, username, or None) -> the value that goes in the URL
    objects: dict[str, dict[str | None, object]]
    secrets: dict[str, str] = field(default_factory=dict)  # username -> API token secret

    def user(self, name: str):
        if name == "anonymous":
            return None
        return getattr(self, name, None) or getattr(self.cast, name)

    def teams_of(self, user) -> set[str]:
        from portal.models import Membership, Team

        if user is None:
            return set()
        if user.is_staff:
            return set(Team.objects.values_list("slug", flat=True))
        return set(Membership.objects.filter(user=user).values_list("team__slug", flat=True))

    def manages(self, user, team: str | None) -> bool:
        from portal.models import Membership

        if user is None:
            return False
        if user.is_staff:
            return True
        admin_of = Membership.objects.filter(user=user, role=Membership.TEAM_ADMIN)
        return admin_of.filter(team__slug=team).exists() if team else admin_of.exists()

    def forbidden_markers(self, user) -> list[str]:
        """Markers that must never reach ``user``: teams they cannot see, people they are not."""
        unseen = {"vision", "nlp"} - self.teams_of(user)
        unmanaged = {t for t in ("vision", "nlp") if not self.manages(user, t)}
        people = {"alice", "bob", "carol", "dora", "admin", "vera"} - ({user.username} if user else set())
        return (
            [f"leak-{t}-" for t in sorted(unseen)]
            + [f"admins-of-{t}-only" for t in sorted(unmanaged)]
            + [f"leak-{p}-" for p in sorted(people)]
        )

    @staticmethod
    def missing(kind: str):
        return {"team": "no-such-team", "offering": "no-such-offering", "workload_kind": "no-such-kind"}.get(
            kind, MISSING_ID
        )


@pytest.fixture
def world(cast, catalog):
    from jobs.models import Kind, Preset, State, Workload
    from portal.models import ApiToken, Membership, Notice, Team
    from quotas import audit
    from quotas.models import AuditEntry, Quota, QuotaException, QuotaRequest

    User = type(cast.alice)
    vera = User.objects.create_user("vera", "vera@example.com", "x")
    Membership.objects.create(user=vera, team=cast.vision, role=Membership.TEAM_ADMIN)
    dora = User.objects.create_user("dora", "dora@example.com", "x")
    Membership.objects.create(user=dora, team=cast.nlp, role=Membership.TEAM_ADMIN)
    Membership.objects.create(user=dora, team=cast.vision, role=Membership.MEMBER)
    now = timezone.now()
    objects: dict[str, dict] = {kind: {} for kind in ("workload", "preset", "quota_request", "quota_exception")}
    for team, user, requester in ((cast.vision, cast.alice, vera), (cast.nlp, cast.bob, cast.bob)):
        t = team.slug
        Quota.objects.create(team=team, gpu_class="A100-80GB", guaranteed=Decimal(1), limit=Decimal(2))
        Quota.objects.create(team=team, gpu_class="H100-80GB", guaranteed=Decimal(1), limit=Decimal(2))
        running = Workload.objects.create(
            team=team,
            created_by=user,
            kind=Kind.NOTEBOOK,
            name=f"leak-{t}-notebook",
            offering=catalog["a100-80gb-1g.10gb"],
            image=NOTEBOOK_IMAGE,
            state=State.RUNNING,
            admission="guaranteed",
            quota_class="A100-80GB",
            quota_charge=Decimal("0.142857"),
            submitted_at=now - timedelta(hours=2),
            started_at=now - timedelta(hours=1),
            created_at=now - timedelta(hours=2),
        )
        waiting = Workload.objects.create(
            team=team,
            created_by=user,
            kind=Kind.TRAINING,
            name=f"leak-{t}-over-quota",
            offering=catalog["h100-80gb"],
            image="nvcr.io/nvidia/pytorch:24.10-py3",
            framework="torch",
            gpus_per_replica=4,
            state=State.PENDING_APPROVAL,
            quota_class="H100-80GB",
            wants_exception=True,
            exception_reason=f"leak-{t}-why-over",
        )
        objects["workload"][t] = running.pk
        objects["preset"][t] = Preset.objects.create(
            team=team,
            name=f"leak-{t}-preset",
            kind=Kind.NOTEBOOK,
            request={"offering": "a100-80gb-1g.10gb", "gpus_per_replica": 1, "image": NOTEBOOK_IMAGE},
            created_by=requester,
        ).pk
        request = QuotaRequest.objects.create(
            team=team,
            gpu_class="A100-80GB",
            limit=Decimal(4),
            justification=f"leak-{t}-justification",
            requested_by=requester,
        )
        objects["quota_request"][t] = request.pk
        objects["quota_exception"][t] = QuotaException.objects.create(
            team=team,
            workload_id=waiting.pk,
            gpu_class="H100-80GB",
            amount=Decimal(4),
            reason=f"leak-{t}-exception",
            requested_by=user,
        ).pk
        audit.record(
            AuditEntry.Action.REQUEST_FILED,
            actor=requester,
            team=team,
            gpu_class="A100-80GB",
            reason=f"leak-{t}-audit admins-of-{t}-only",
            request=request,
        )
    secrets, tokens = {}, {}
    for person in (cast.alice, cast.bob, cast.carol, dora, cast.admin):
        token, secrets[person.username] = ApiToken.issue(person, f"leak-{person.username}-token")
        tokens[person.username] = token.pk
        Notice.objects.create(user=person, subject=f"leak-{person.username}-notice", link="/quotas/")
    objects["token"] = tokens
    objects["team"] = {slug: slug for slug in Team.objects.values_list("slug", flat=True)}
    objects["offering"] = {None: "h100-80gb"}
    objects["workload_kind"] = {None: Kind.NOTEBOOK.value}
    return World(cast=cast, vera=vera, dora=dora, objects=objects, secrets=secrets)


# -- calling a route ----------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict
    body: bytes
    location: str = ""


def call(client: Client, method: str, url: str, *, data=None, api: bool = False, headers=None) -> Answer:
    """One request in a savepoint that is rolled back; the body read inside it (streams query lazily).

    The client's cookies are restored after, so a logout or a session change does not leak
    into the next call.
    """
    cookies = copy.deepcopy(client.cookies)
    kwargs = {"headers": headers or {}}
    if data is not None and method != "GET":
        if api:
            kwargs.update(data=json.dumps(data), content_type="application/json")
        elif method == "POST":
            kwargs["data"] = data
        else:
            kwargs.update(data=urlencode(data, doseq=True), content_type="application/x-www-form-urlencoded")
    elif data is not None:
        kwargs["data"] = data
    with transaction.atomic():
        response = getattr(client, method.lower())(url, **kwargs)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        transaction.set_rollback(True)
    client.cookies = cookies
    return Answer(response.status_code, dict(response.headers), body, response.get("Location", ""))


@pytest.fixture
def clients(world):
    """A logged-in (session) client per subject, and one anonymous.

    A view that raises answers 500 here, as in production, so one crash is reported with
    every other failing call instead of stopping the walk.
    """
    made = {}
    for name in SUBJECTS:
        client = Client(raise_request_exception=False)
        if name != "anonymous":
            client.force_login(world.user(name))
        made[name] = client
    return made
