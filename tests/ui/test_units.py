"""One unit per thing, said the same way in the offering picker, the quota table and the timeline."""

import html
import re
from decimal import Decimal

import pytest

from portal.units import class_amount, offering_amount, request_amount, unit_noun

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def test_an_offering_is_counted_in_its_own_unit(catalog):
    assert offering_amount(catalog["a100-80gb-1g.10gb"], 1) == "1 slice of A100-80GB (1g.10gb)"
    assert offering_amount(catalog["a100-80gb-1g.10gb"], 14) == "14 slices of A100-80GB (1g.10gb)"
    assert offering_amount(catalog["h100-80gb"], 1) == "1 H100-80GB GPU"
    assert offering_amount(catalog["h100-80gb"], 2) == "2 H100-80GB GPUs"
    assert offering_amount(catalog["l4-shared"], 1) == "1 share of L4 (1/4 GPU each)"
    assert offering_amount(catalog["cpu"], 2) == "2 CPU-only replicas"
    assert [unit_noun(catalog["a100-80gb-1g.10gb"], n) for n in (0, 1, 2)] == ["slices", "slice", "slices"]


def test_a_quota_class_is_counted_in_gpus_or_in_slices_of_a_profile():
    assert class_amount("A100-80GB", Decimal(2)) == "2 A100-80GB GPUs"
    assert class_amount("A100-80GB", Decimal("0.142857")) == "0.14 A100-80GB GPU"
    assert class_amount("A100-80GB/1g.10gb", Decimal(3)) == "3 slices of A100-80GB (1g.10gb)"


def test_a_slice_charged_to_its_gpus_says_both_amounts(catalog):
    slice_ = catalog["a100-80gb-1g.10gb"]
    assert request_amount(slice_, 1, "A100-80GB", Decimal("0.142857")) == (
        "1 slice of A100-80GB (1g.10gb) = 0.14 A100-80GB GPU"
    )
    # A profile's own quota counts slices already: nothing to convert.
    assert request_amount(slice_, 2, "A100-80GB/1g.10gb", Decimal(2)) == "2 slices of A100-80GB (1g.10gb)"
    assert request_amount(catalog["h100-80gb"], 2, "H100-80GB", Decimal(2)) == "2 H100-80GB GPUs"


def test_picker_quota_table_and_timeline_name_the_same_units_for_a_slice(client, quotas, notebook):
    client.force_login(quotas.alice)
    form = client.get("/workloads/new/notebook/").content.decode()
    row = re.search(
        r'<tr[^>]*>\s*<td><input type="radio" name="offering" id="offering-a100-80gb-1g.10gb".*?</tr>', form, re.S
    )
    cells = " ".join(re.sub(r"<[^>]+>", " ", row.group(0)).split())
    assert "$0.40 per slice" in cells and "13 slices" in cells  # 2 GPUs (14 slices) less the notebook's slice
    assert 'data-unit="slice" data-units="slices"' in row.group(0)

    bars = text(client.get("/quotas/bars/?team=vision", HTTP_HX_REQUEST="true"))
    assert "0.14 of 2 A100-80GB GPUs" in bars

    page = text(client.get(f"/workloads/{notebook.pk}/"))
    assert "this request needs 1 slice of A100-80GB (1g.10gb) = 0.14 A100-80GB GPU" in page
    assert "$0.40/h per slice" in page


def test_the_estimate_names_the_offerings_unit(client, quotas):
    client.force_login(quotas.alice)
    page = client.post(
        "/workloads/new/notebook/",
        {"kind": "notebook", "team": "vision", "offering": "a100-80gb-1g.10gb", "action": "refresh"},
    )
    estimate = " ".join(re.search(r'<p id="cost-estimate".*?</p>', page.content.decode(), re.S).group(0).split())
    assert "(1 slice × $0.4000)" in estimate


def test_a_cpu_only_workload_holds_no_gpu(client, quotas, make_workload):
    workload = make_workload(offering="cpu", gpus_per_replica=0)
    client.force_login(quotas.alice)
    page = text(client.get(f"/workloads/{workload.pk}/"))
    assert "GPUs None: CPU only" in page
    assert "$0.10/h per replica" in page
