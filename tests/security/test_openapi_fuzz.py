"""The API against its own OpenAPI description, with generated requests (Schemathesis).

Covers every operation in /api/schema/ (read in-process from the Django app, so a new
endpoint is fuzzed as soon as drf-spectacular describes it). Requests are generated
from the schema (its examples first, then up to ``MAX_EXAMPLES`` per operation, the
same ones every run), sent as alice (member of vision) with a Bearer token, over the
`world` of tests/security/conftest.py. Schemathesis generates valid and invalid input
(its default modes: wrong types, unknown parameters, odd strings). Each answer must:

- not be a server error (5xx);
- have a status code the schema documents for the operation;
- have the documented content type, and a body that matches the documented schema;
- be refused without credentials when the schema says the operation needs them
  (``ignored_auth`` repeats the call without the token).

When this fails on a schema mismatch, fix the description where the endpoint is
(``extend_schema`` in the API module, or the errors every endpoint gives in portal/schema.py), not the
checks. The cluster is deliberately unconfigured here, so the endpoints that read it
answer as they do when it is down (the sandbox is used by the generated access tests).
"""

from __future__ import annotations

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings

schemathesis = pytest.importorskip("schemathesis", reason="pin schemathesis==4.32.5 in requirements-dev.txt")
from schemathesis.checks import not_a_server_error  # noqa: E402 (after the skip above)
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    ignored_auth,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 15
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def in_test_transaction(app):
    """The WSGI app, without Django closing the database connection around each request.

    Django closes "old" connections when a request starts and ends; inside a test that
    would close the connection holding the test's transaction. Django's own test client
    disconnects the same handler for the same reason.
    """

    def wsgi(environ, start_response):
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = app(environ, start_response)
            try:
                return [b"".join(response)]
            finally:
                response.close()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)

    return wsgi


def load_schema():
    from portal.wsgi import application

    # Read at collection, like a client would read it: one test per operation.
    # (``schemathesis.pytest.from_fixture`` would load it per test, but does not run under pytest 9.)
    return schemathesis.openapi.from_wsgi("/api/schema/", in_test_transaction(application))


schema = load_schema()


@pytest.fixture(autouse=True)
def no_cluster(settings, tmp_path):
    settings.KUBE_CONFIG = str(tmp_path / "no-cluster")


@pytest.mark.openapi_fuzz
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found
    suppress_health_check=list(HealthCheck),
)
@schema.parametrize()
def test_the_api_answers_as_its_schema_says(case, world):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {world.secrets['alice']}"}, checks=CHECKS, additional_checks=[ignored_auth]
    )


def test_the_csv_export_serves_clients_that_ask_for_csv(world, client):
    """The schema says text/csv; a client saying so in Accept was refused with 406."""
    headers = {"HTTP_AUTHORIZATION": f"Bearer {world.secrets['alice']}", "HTTP_ACCEPT": "text/csv"}
    response = client.get("/api/v1/usage/export.csv?team=vision", **headers)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert b"leak-vision-notebook" in response.content and b"leak-nlp-" not in response.content
    refused = client.get("/api/v1/usage/export.csv?start=yesterday", **headers)
    assert refused.status_code == 400 and refused.json()["start"]


def test_a_path_the_api_does_not_have_answers_in_the_apis_format(world, client):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {world.secrets['alice']}"}
    response = client.get("/api/v1/workloads/not-a-number/logs/", **headers)
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    assert client.get("/no-such-page/").status_code == 404
    assert "text/html" in client.get("/no-such-page/")["Content-Type"]
