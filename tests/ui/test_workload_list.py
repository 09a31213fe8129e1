import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def names(response) -> set[str]:
    return set(re.findall(r'<a href="/workloads/\d+/">([^<]+)</a>', response.content.decode()))


def test_an_anonymous_visitor_is_sent_to_the_login_page(client, db):
    response = client.get("/workloads/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/workloads/")


def test_the_list_shows_only_the_workloads_of_the_users_own_teams(client, cast, make_workload):
    make_workload(cast.vision, name="vision-nb")
    make_workload(cast.nlp, name="nlp-nb", user=cast.bob)
    client.force_login(cast.alice)
    assert names(client.get("/workloads/")) == {"vision-nb"}
    client.force_login(cast.carol)
    assert names(client.get("/workloads/")) == {"vision-nb", "nlp-nb"}


def test_the_list_filters_by_team_kind_and_state(client, cast, make_workload):
    make_workload(cast.vision, name="nb-running")
    make_workload(cast.vision, name="train-failed", kind="training", state="failed")
    make_workload(cast.nlp, name="nlp-endpoint", kind="endpoint", user=cast.bob)
    client.force_login(cast.carol)
    assert names(client.get("/workloads/?team=nlp")) == {"nlp-endpoint"}
    assert names(client.get("/workloads/?kind=training")) == {"train-failed"}
    assert names(client.get("/workloads/?state=running")) == {"nb-running", "nlp-endpoint"}
    assert names(client.get("/workloads/?team=vision&state=failed")) == {"train-failed"}


def test_an_htmx_request_gets_the_table_fragment_that_polls_with_its_filters(client, cast, make_workload):
    make_workload(cast.vision, name="nb")
    client.force_login(cast.alice)
    page = client.get("/workloads/?kind=notebook", **HTMX).content.decode()
    assert "<html" not in page
    assert 'id="workload-table"' in page
    assert 'hx-trigger="every 5s"' in page
    assert 'hx-get="/workloads/?kind=notebook"' in page


def test_the_full_page_has_the_filter_form_new_workload_links_and_state_badges(client, cast, make_workload):
    make_workload(cast.vision, name="nb", state="submitted")
    client.force_login(cast.alice)
    page = client.get("/workloads/").content.decode()
    assert 'hx-push-url="true"' in page
    for kind in ("notebook", "training", "endpoint"):
        assert f'href="/workloads/new/{kind}/"' in page
    assert 'class="badge state state-submitted">Submitted<' in page
    assert '<script src="/static/portal/workloads.js" defer></script>' in page  # pauses polls in hidden tabs
    assert client.get("/static/portal/workloads.js").status_code == 200


def test_the_list_is_paginated_by_fifty(client, cast, make_workload):
    for _ in range(51):
        make_workload(cast.vision)
    client.force_login(cast.alice)
    first = client.get("/workloads/")
    assert len(names(first)) == 50
    assert "Page 1 of 2" in first.content.decode()
    assert len(names(client.get("/workloads/?page=2"))) == 1


def test_the_number_of_queries_does_not_grow_with_the_number_of_workloads(
    client, cast, make_workload, django_assert_max_num_queries
):
    client.force_login(cast.carol)
    for i in range(5):
        make_workload(cast.vision if i % 2 else cast.nlp, user=cast.carol)
    with CaptureQueriesContext(connection) as five:
        assert client.get("/workloads/").status_code == 200
    for i in range(20):
        make_workload(cast.vision if i % 2 else cast.nlp, user=cast.bob if i % 3 else cast.alice)
    with django_assert_max_num_queries(len(five)):
        response = client.get("/workloads/")
    assert len(names(response)) == 25
