"""The notices inbox: what the portal told each person, an unread count in the navigation, mark read.

alice: member of vision (gets notices). bob: team admin of nlp (files quota requests).
admin: platform admin (decides them; reads only their own notices).
"""

import html
import re

import pytest

from portal.models import Notice
from portal.notices import notify, unread_count
from quotas.approvals import decide_request
from quotas.requests import file_request

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def test_a_decision_on_a_quota_request_lands_in_the_requesters_inbox(client, cast, catalog):
    request = file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", limit=8, justification="Fine-tuning")
    decide_request(cast.admin, request.pk, approve=False, comment="Not this quarter")
    client.force_login(cast.bob)
    page = text(client.get("/notices/"))
    assert "Denied: more H100-80GB for nlp" in page
    assert "Comment: Not this quarter" in page
    assert "Notices 1" in page  # the unread count in the navigation


def test_the_inbox_shows_only_ones_own_notices_even_to_a_platform_admin(client, cast):
    notify(cast.alice, "For alice only")
    notify(cast.admin, "For the admin")
    client.force_login(cast.admin)
    page = text(client.get("/notices/"))
    assert "For the admin" in page and "For alice only" not in page


def test_the_unread_count_follows_new_and_read_notices(client, cast):
    client.force_login(cast.alice)
    assert "Notices" in text(client.get("/"))
    assert unread_count(cast.alice) == 0
    first = notify(cast.alice, "One")
    notify(cast.alice, "Two")
    assert unread_count(cast.alice) == 2
    assert "Notices 2" in text(client.get("/"))
    response = client.post("/notices/read/", {"notice": first.pk})
    assert response.status_code == 302 and response["Location"] == "/notices/"
    assert unread_count(cast.alice) == 1
    client.post("/notices/read/", {"all": "1"})
    assert unread_count(cast.alice) == 0
    assert Notice.objects.filter(user=cast.alice, read_at__isnull=True).count() == 0


def test_the_unread_count_costs_no_query_once_cached(cast, django_assert_num_queries):
    notify(cast.alice, "One")
    assert unread_count(cast.alice) == 1
    with django_assert_num_queries(0):
        assert unread_count(cast.alice) == 1


def test_marking_someone_elses_notice_read_changes_nothing(client, cast):
    theirs = notify(cast.bob, "Bob's")
    client.force_login(cast.alice)
    client.post("/notices/read/", {"notice": theirs.pk})
    theirs.refresh_from_db()
    assert theirs.read_at is None


def test_a_notice_id_that_is_not_a_number_is_refused_naming_the_field(client, cast):
    client.force_login(cast.alice)
    response = client.post("/notices/read/", {"notice": "abc"})
    assert response.status_code == 400
    assert b"notice: must be the id" in response.content


def test_opening_a_notice_marks_it_read_and_goes_to_its_link(client, cast):
    notice = notify(cast.alice, "Approved", link="/quotas/")
    client.force_login(cast.alice)
    response = client.post("/notices/read/", {"notice": notice.pk, "next": "/quotas/"})
    assert response.status_code == 302 and response["Location"] == "/quotas/"
    notice.refresh_from_db()
    assert notice.read_at is not None


def test_open_never_leaves_the_portal(client, cast):
    notice = notify(cast.alice, "Approved", link="/quotas/")
    client.force_login(cast.alice)
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        response = client.post("/notices/read/", {"notice": notice.pk, "next": target})
        assert response["Location"] == "/notices/", target


def test_the_inbox_marks_unread_notices_and_offers_to_open_them(client, cast):
    notify(cast.alice, "Unread one", body="Line one\nLine two", link="/workloads/1/")
    client.force_login(cast.alice)
    page = client.get("/notices/").content.decode()
    assert 'class="notice-item unread"' in page
    assert 'name="next" value="/workloads/1/"' in page
    assert "Line one<br>Line two" in page
