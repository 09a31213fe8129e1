"""Chargeback API and CSV export: numbers, scoping and parameter errors."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest


@pytest.fixture
def spend_data(make_workload, cast):
    a = make_workload("h100-80gb", started="2026-03-02 23:30:00", finished="2026-03-03 00:30:00", name="train-a")
    b = make_workload(
        "a100-80gb-1g.10gb",
        user=cast.carol,
        started="2026-03-03 10:00:00",
        finished="2026-03-03 13:00:00",
        units=2,
        name="nb-b",
    )
    c = make_workload(
        "h100-80gb",
        team=cast.nlp,
        user=cast.bob,
        started="2026-03-04 00:00:00",
        finished="2026-03-04 02:00:00",
        units=4,
        name="train-c",
    )
    return a, b, c


def test_members_see_their_teams_and_admins_see_all(api, cast, spend_data):
    params = {"group_by": "team", "start": "2026-03-01", "end": "2026-03-31"}
    api.force_authenticate(cast.alice)
    body = api.get("/api/v1/usage/", params).json()
    assert [(r["key"], r["allocated"]) for r in body["results"]] == [("vision", "6.40")]  # 4.00 + 2 × 0.40 × 3
    api.force_authenticate(cast.bob)
    assert [r["key"] for r in api.get("/api/v1/usage/", params).json()["results"]] == ["nlp"]
    api.force_authenticate(cast.admin)
    body = api.get("/api/v1/usage/", params).json()
    assert [(r["key"], r["allocated"]) for r in body["results"]] == [("nlp", "32.00"), ("vision", "6.40")]
    assert body["total"]["allocated"] == "38.40"
    api.force_authenticate(cast.alice)
    assert api.get("/api/v1/usage/", {**params, "team": "nlp"}).status_code == 404


@pytest.mark.parametrize("group_by", ["team", "user", "workload", "offering", "day"])
def test_every_grouping_adds_up_to_the_same_total(api, cast, spend_data, group_by):
    api.force_authenticate(cast.admin)
    body = api.get("/api/v1/usage/", {"group_by": group_by, "start": "2026-03-01", "end": "2026-03-31"}).json()
    assert (
        sum(Decimal(r["allocated"]) for r in body["results"]) == Decimal(body["total"]["allocated"]) == Decimal("38.40")
    )
    for r in body["results"]:
        assert Decimal(r["used"]) + Decimal(r["idle"]) == Decimal(r["allocated"])


def test_the_day_grouping_splits_a_run_at_midnight(api, cast, spend_data):
    api.force_authenticate(cast.alice)
    body = api.get("/api/v1/usage/", {"group_by": "day", "start": "2026-03-02", "end": "2026-03-03"}).json()
    assert [(r["key"], r["allocated"]) for r in body["results"]] == [("2026-03-02", "2.00"), ("2026-03-03", "4.40")]


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"group_by": "project"}, "group_by"),
        ({"start": "03/01/2026"}, "start"),
        ({"end": "2026-02-30"}, "end"),
        ({"start": "2026-03-05", "end": "2026-03-01"}, "end"),
        ({"start": "2024-01-01", "end": "2026-01-01"}, "end"),
    ],
)
def test_bad_parameters_are_refused_naming_the_parameter(api, cast, params, name):
    api.force_authenticate(cast.alice)
    response = api.get("/api/v1/usage/", params)
    assert response.status_code == 400
    assert name in response.json()
    if name != "group_by":
        assert api.get("/api/v1/usage/export.csv", params).status_code == 400


def test_the_export_has_a_row_per_team_user_workload_class_and_day(api, cast, spend_data):
    api.force_authenticate(cast.carol)  # in both teams
    response = api.get("/api/v1/usage/export.csv", {"start": "2026-03-01", "end": "2026-03-31"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [
        (r["day"], r["team"], r["user"], r["workload"], r["gpu_class"], r["minutes"], r["allocated_cost"]) for r in rows
    ] == [
        ("2026-03-02", "vision", "alice", "train-a", "H100-80GB", "30", "2.00"),
        ("2026-03-03", "vision", "alice", "train-a", "H100-80GB", "30", "2.00"),
        ("2026-03-03", "vision", "carol", "nb-b", "A100-80GB/1g.10gb", "180", "2.40"),
        ("2026-03-04", "nlp", "bob", "train-c", "H100-80GB", "120", "32.00"),
    ]
    api.force_authenticate(cast.alice)
    rows = list(
        csv.DictReader(
            io.StringIO(
                api.get("/api/v1/usage/export.csv", {"start": "2026-03-01", "end": "2026-03-31"}).content.decode()
            )
        )
    )
    assert {r["team"] for r in rows} == {"vision"}


def test_the_api_needs_a_login(api):
    assert api.get("/api/v1/usage/").status_code in (401, 403)
    assert api.get("/api/v1/usage/export.csv").status_code in (401, 403)
