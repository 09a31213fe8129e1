"""Who may call which route: the decision for every URL name, read by the generated tests.

A route missing here fails ``test_every_route_has_an_access_rule``, so a new endpoint
cannot ship without someone deciding who may use it. Keys are URL names; API routes
(under /api/v1/) get an ``api:`` prefix because some names are shared with pages.

The rules (portal/access.py is the code that enforces them):

- ``PUBLIC``: anyone, signed in or not.
- ``USER``: any signed-in user; an object of a team they are not in is a 404.
- ``TEAM_ADMIN``: team admins of the object's team, and platform admins; a member of the
  team gets 403 (they can see the object); another team's object is a 404. Without an
  object (the audit log): whoever is a team admin of some team, or a platform admin.
- ``PLATFORM_ADMIN``: platform admins only. Everyone else is refused *before* any lookup,
  so the answer is the same for an existing object of any team and for a missing one
  (checked in the tests with an id that does not exist): it reveals nothing.
- ``PLATFORM_ADMIN_OF_VISIBLE``: platform admins only, but the object is looked up first:
  another team's object is a 404, one of the caller's teams a 403.

Anonymous callers get 401 from the API and a redirect to the login page from pages.
``team_in``: the route names its team in the body or query string (``team=<slug>``)
instead of the URL; the tests send each team in turn. ``other`` is the answer for a
team the caller is not in where that is not 404 (an API body field is a 400, naming
the field, with the same text for a team that does not exist).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Rule:
    who: str
    team_in: str | None = None  # "body" or "query"
    other: int = 404
    denied: int = 403
    note: str = ""

    def via(self, team_in: str, other: int = 404) -> Rule:
        return replace(self, team_in=team_in, other=other)

    def denying(self, status: int) -> Rule:
        return replace(self, denied=status)


PUBLIC = Rule("public")
USER = Rule("user")
TEAM_ADMIN = Rule("team_admin")
PLATFORM_ADMIN = Rule("platform_admin")
PLATFORM_ADMIN_OF_VISIBLE = Rule("platform_admin_of_visible")
# SSO endpoints are public (they are how one signs in) and answer 404 while SSO is off.
SSO_OFF = Rule("public", note="404 while OIDC_ISSUER is unset")

ACCESS: dict[str, dict[str, Rule]] = {
    # -- portal ---------------------------------------------------------------------------
    "home": {"GET": USER, "POST": USER},
    "login": {"GET": PUBLIC, "POST": PUBLIC, "PUT": PUBLIC},
    "logout": {"POST": PUBLIC},
    "oidc_authentication_init": {"GET": SSO_OFF},
    "oidc_authentication_callback": {"GET": SSO_OFF},
    "profile": {"GET": USER, "POST": USER},
    "revoke-token": {"POST": USER},  # one's own tokens only: anyone else's, even for admins, is a 404
    "switch-team": {"POST": USER.via("body")},
    # One's own notices only: ids of anyone else's (even for admins) match nothing.
    "notice-list": {"GET": USER},
    "notice-read": {"POST": USER},
    # Probes: public, and they say nothing but ok/down.
    "healthz": {"GET": PUBLIC, "POST": PUBLIC},
    "readyz": {"GET": PUBLIC, "POST": PUBLIC},
    # Prometheus scrapes it without a session; PORTAL_METRICS_TOKEN protects it (403 in
    # production without one). Tests run in development mode without a token: open.
    "portal-metrics": {"GET": PUBLIC, "POST": PUBLIC},
    # The API's description holds no data; the docs page only loads it.
    "schema": {"GET": PUBLIC},
    "api-docs": {"GET": PUBLIC},
    "api:team-list": {"GET": USER},
    "api:team-detail": {"GET": USER},
    "api:offering-list": {"GET": USER},
    "api:offering-detail": {"GET": USER},
    # -- jobs -----------------------------------------------------------------------------
    "api:workload-list": {"GET": USER, "POST": USER.via("body", other=400)},
    "api:workload-preview": {"POST": USER.via("body", other=400)},
    "api:workload-detail": {"GET": USER, "DELETE": USER},
    "api:workload-logs": {"GET": USER},
    "api:workload-start": {"POST": USER},
    "api:workload-stop": {"POST": USER},
    "api:workload-rollout": {"POST": USER},
    "api:workload-promote": {"POST": USER},
    "api:workload-rollback": {"POST": USER},
    "workload-list": {"GET": USER},
    "workload-new": {"GET": USER, "POST": USER.via("body", other=200)},  # the form shows "not one of your teams"
    "workload-preview": {"POST": USER.via("body", other=200)},
    "workload-detail": {"GET": USER},
    "workload-live": {"GET": USER},
    "workload-logs": {"GET": USER},
    "workload-manifests": {"GET": USER},
    "cluster-banner": {"GET": USER},
    "workload-stop": {"POST": USER},
    "workload-rollout": {"POST": USER},
    "workload-promote": {"POST": USER},
    "workload-rollback": {"POST": USER},
    "workload-start": {"POST": USER},
    "workload-delete": {"POST": USER},
    "workload-save-preset": {"POST": TEAM_ADMIN},
    "preset-list": {"GET": USER},
    "preset-delete": {"POST": TEAM_ADMIN},
    # -- quotas ---------------------------------------------------------------------------
    "quota-bars": {"GET": USER.via("query")},
    "api:team-quota": {"GET": USER, "POST": PLATFORM_ADMIN_OF_VISIBLE},
    "api:quota-request-list": {"GET": USER, "POST": TEAM_ADMIN.via("body", other=400)},
    "api:quota-request-detail": {"GET": USER},
    "api:quota-request-approve": {"POST": PLATFORM_ADMIN_OF_VISIBLE},
    "api:quota-request-deny": {"POST": PLATFORM_ADMIN_OF_VISIBLE},
    "api:quota-request-withdraw": {"POST": TEAM_ADMIN},  # or the requester (team admins file them)
    "api:quota-exception-list": {"GET": USER},
    "api:quota-exception-detail": {"GET": USER},
    "api:quota-exception-approve": {"POST": PLATFORM_ADMIN_OF_VISIBLE},
    "api:quota-exception-deny": {"POST": PLATFORM_ADMIN_OF_VISIBLE},
    "api:audit-entry-list": {"GET": TEAM_ADMIN},
    "quota-overview": {"GET": USER},
    "quota-request-create": {"POST": TEAM_ADMIN.via("body")},
    "quota-request-withdraw": {"POST": TEAM_ADMIN},
    "approvals-console": {"GET": PLATFORM_ADMIN},
    "approvals-decide": {"POST": PLATFORM_ADMIN},
    "approvals-set-quota": {"POST": PLATFORM_ADMIN},
    "approvals-request-preview": {"GET": PLATFORM_ADMIN},
    "approvals-exception-preview": {"GET": PLATFORM_ADMIN},
    "audit-log": {"GET": TEAM_ADMIN},
    "audit-export": {"GET": TEAM_ADMIN},
    # -- usage ----------------------------------------------------------------------------
    "api:usage-api": {"GET": USER.via("query")},
    "api:usage-export": {"GET": USER.via("query")},
    "api:usage-rightsizing": {"GET": USER.via("query")},
    "api:usage-cluster": {"GET": PLATFORM_ADMIN},
    "usage-dashboard": {"GET": USER.via("query"), "POST": USER.via("query")},
    "usage-cluster": {"GET": PLATFORM_ADMIN.denying(404), "POST": PLATFORM_ADMIN.denying(404)},
    "usage-workload": {"GET": USER, "POST": USER},
    "usage-estimate": {"GET": USER, "POST": USER},
}
