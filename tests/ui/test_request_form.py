import html
import re

import pytest
from django.utils import timezone

from jobs.models import State, Workload
from portal.models import Offering
from quotas.models import Quota
from tests.ui.conftest import NOTEBOOK_IMAGE, TRAINING_IMAGE

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def notebook_input(**overrides) -> dict:
    data = {
        "kind": "notebook",
        "team": "vision",
        "name": "explore",
        "offering": "a100-80gb-1g.10gb",
        "image": NOTEBOOK_IMAGE,
        "action": "create",
    }
    data.update(overrides)
    return data


def field_errors(page: str, field: str) -> list[str]:
    """The messages rendered next to a field (its id_<field>_error list)."""
    match = re.search(rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>', page, re.S)
    return [html.unescape(m) for m in re.findall(r"<li>(.*?)</li>", match.group(1), re.S)] if match else []


def test_the_form_of_each_kind_shows_the_fields_of_that_kind(client, quotas):
    client.force_login(quotas.alice)
    notebook = client.get("/workloads/new/notebook/").content.decode()
    training = client.get("/workloads/new/training/").content.decode()
    endpoint = client.get("/workloads/new/endpoint/").content.decode()
    assert 'name="workspace_gib"' in notebook and 'name="replicas"' not in notebook
    assert 'name="framework"' in training and 'name="max_runtime_seconds"' in training
    assert 'name="storage_uri"' in endpoint and 'name="max_replicas"' in endpoint
    assert 'name="stopped"' not in notebook
    assert client.get("/workloads/new/cronjob/").status_code == 404


def test_the_team_select_offers_only_the_users_own_teams(client, quotas):
    client.force_login(quotas.alice)
    page = client.get("/workloads/new/notebook/").content.decode()
    select = re.search(r'<select id="id_team".*?</select>', page, re.S).group(0)
    assert re.findall(r'<option value="([a-z]+)"', select) == ["vision"]


def picker_cells(page: str, slug: str) -> list[str]:
    """The text of each cell of the offering picker's row for ``slug``."""
    row = re.search(
        rf'<tr[^>]*>\s*<td><input type="radio" name="offering" id="offering-{re.escape(slug)}".*?</tr>', page, re.S
    )
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]


def test_the_offering_picker_shows_price_memory_capacity_and_what_the_team_has_left(client, quotas):
    Offering.objects.filter(slug="h100-80gb").update(total_units=16, free_units=5, capacity_observed_at=timezone.now())
    client.force_login(quotas.alice)
    page = client.get("/workloads/new/notebook/").content.decode()
    _, name, gpu, memory, price, free, left = picker_cells(page, "h100-80gb")
    assert (gpu, memory, price, free, left) == ("H100-80GB", "80 GiB", "$4.00 per GPU", "5 of 16 GPUs", "2 GPUs")
    assert "h100-80gb" in name
    # Never observed: "unknown"; 2 A100s are 14 slices of 1/7, counted in slices like their price.
    assert picker_cells(page, "a100-80gb-1g.10gb")[2:] == [
        "A100-80GB · MIG 1g.10gb",
        "10 GiB",
        "$0.40 per slice",
        "unknown",
        "14 slices",
    ]
    assert picker_cells(page, "cpu")[2:] == ["CPU only", "—", "$0.10 per replica", "—", "—"]


def test_changing_the_team_re_renders_the_picker_with_that_teams_quota(client, quotas):
    Quota.objects.filter(team=quotas.nlp, gpu_class="H100-80GB").update(used=1)
    client.force_login(quotas.carol)
    response = client.get(
        "/workloads/new/notebook/?team=nlp&offering=h100-80gb", HTTP_HX_TARGET="offering-picker", **HTMX
    )
    page = response.content.decode()
    assert "<html" not in page and 'id="offering-picker"' in page
    assert "nlp has left" in page
    assert re.search(r'id="offering-h100-80gb"[^>]*checked', page)
    assert picker_cells(page, "h100-80gb")[-1] == "1 GPU"
    client.force_login(quotas.alice)
    assert client.get("/workloads/new/notebook/?team=nlp", HTTP_HX_TARGET="offering-picker", **HTMX).status_code == 404


def test_a_valid_request_creates_the_workload_enqueues_its_submission_and_redirects(
    client, quotas, django_capture_on_commit_callbacks
):
    client.force_login(quotas.alice)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(
            "/workloads/new/notebook/",
            notebook_input(
                env="HF_HOME=/home/jovyan/.cache\n# a comment\n", labels="project=resnet", workspace_gib="20"
            ),
        )
    workload = Workload.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/workloads/{workload.pk}/"
    assert (workload.team, workload.created_by, workload.state) == (quotas.vision, quotas.alice, State.QUEUED)
    assert workload.env == {"HF_HOME": "/home/jovyan/.cache"}
    assert workload.labels == {"project": "resnet"}
    assert workload.workspace_gib == 20
    assert len(callbacks) == 1  # submit_workload.delay, after commit


def test_command_and_args_are_split_like_a_shell_would(client, quotas):
    client.force_login(quotas.alice)
    client.post(
        "/workloads/new/training/",
        {
            "kind": "training",
            "team": "vision",
            "name": "bert",
            "offering": "h100-80gb",
            "framework": "torch",
            "image": TRAINING_IMAGE,
            "command": "torchrun\ntrain.py",
            "args": '--run-name "first try" --epochs=3',
            "action": "create",
        },
    )
    workload = Workload.objects.get()
    assert workload.command == ["torchrun", "train.py"]
    assert workload.args == ["--run-name", "first try", "--epochs=3"]


def test_a_forbidden_variable_is_reported_next_to_its_field_and_the_input_is_kept(client, quotas):
    client.force_login(quotas.alice)
    response = client.post(
        "/workloads/new/notebook/", notebook_input(name="keep-me", env="NVIDIA_VISIBLE_DEVICES=all\nOK=1")
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert not Workload.objects.exists()
    assert any(e.startswith("NVIDIA_VISIBLE_DEVICES cannot be set") for e in field_errors(page, "env"))
    assert 'aria-invalid="true"' in re.search(r'<textarea name="env".*?>', page, re.S).group(0)
    assert "NVIDIA_VISIBLE_DEVICES=all\nOK=1</textarea>" in page
    assert 'value="keep-me"' in page
    assert re.search(r'id="offering-a100-80gb-1g.10gb"[^>]*checked', page)


def test_every_invalid_field_gets_its_own_message(client, quotas):
    client.force_login(quotas.alice)
    page = client.post(
        "/workloads/new/notebook/",
        notebook_input(name="Bad_Name", image="ubuntu", gpus_per_replica="3", labels="not a pair"),
    ).content.decode()
    assert field_errors(page, "name")[0].startswith("must start with a lowercase letter")
    assert "an implied 'latest'" in field_errors(page, "image")[0]
    assert field_errors(page, "gpus_per_replica")[0].startswith("must be 1: a replica gets one MIG slice")
    assert field_errors(page, "labels") == ["line 1: write KEY=VALUE (got 'not a pair')"]
    assert not Workload.objects.exists()


def test_an_unknown_offering_is_reported_under_the_picker(client, quotas):
    client.force_login(quotas.alice)
    page = client.post("/workloads/new/notebook/", notebook_input(offering="tpu-v5")).content.decode()
    assert field_errors(page, "offering")[0].startswith("unknown offering 'tpu-v5'")


def test_an_over_quota_request_shows_the_numbers(client, quotas):
    client.force_login(quotas.alice)
    page = client.post(
        "/workloads/new/training/",
        {
            "kind": "training",
            "team": "vision",
            "name": "big",
            "offering": "h100-80gb",
            "framework": "torch",
            "replicas": "2",
            "gpus_per_replica": "8",
            "image": TRAINING_IMAGE,
            "action": "create",
        },
    ).content.decode()
    assert (
        "Over quota: vision has 0 of 2 H100-80GB GPUs in use; this request needs 16 H100-80GB GPUs."
        in html.unescape(page)
    )
    assert not Workload.objects.exists()
    assert 'value="big"' in page


def test_asking_for_an_exception_makes_an_over_quota_request_wait_for_approval(client, quotas):
    client.force_login(quotas.alice)
    client.post(
        "/workloads/new/notebook/",
        notebook_input(offering="h100-80gb", gpus_per_replica="4", wants_exception="on", exception_reason="deadline"),
    )
    workload = Workload.objects.get()
    assert workload.state == State.PENDING_APPROVAL
    assert workload.exception_reason == "deadline"


def test_a_user_cannot_request_for_a_team_they_are_not_in(client, quotas):
    client.force_login(quotas.alice)
    page = client.post("/workloads/new/notebook/", notebook_input(team="nlp")).content.decode()
    assert "Select a valid choice" in page
    assert not Workload.objects.exists()


def test_the_preview_renders_the_manifests_as_yaml_and_creates_nothing(client, quotas):
    client.force_login(quotas.alice)
    response = client.post("/workloads/preview/", notebook_input(action="preview"), **HTMX)
    page = html.unescape(response.content.decode())
    assert response.status_code == 200
    assert "<html" not in page
    assert "kind: Notebook" in page
    assert "name: explore" in page
    assert "nvidia.com/mig-1g.10gb" in page
    assert not Workload.objects.exists()


def test_the_preview_lists_the_errors_instead(client, quotas):
    client.force_login(quotas.alice)
    page = client.post("/workloads/preview/", notebook_input(image=""), **HTMX).content.decode()
    assert "This request would be refused" in page
    assert "<strong>Image:</strong> is required" in page


def test_the_preview_works_without_javascript_as_a_full_page(client, quotas):
    client.force_login(quotas.alice)
    page = html.unescape(client.post("/workloads/preview/", notebook_input(action="preview")).content.decode())
    assert "<html" in page and "kind: Notebook" in page
    assert 'value="explore"' in page  # the form is still filled in
    assert not Workload.objects.exists()


def test_an_endpoints_estimate_is_at_max_replicas_for_quota_and_gives_the_min_replicas_rate(client, quotas):
    client.force_login(quotas.alice)
    page = client.post(
        "/workloads/new/endpoint/",
        {
            "kind": "endpoint",
            "team": "vision",
            "offering": "h100-80gb",
            "gpus_per_replica": "2",
            "min_replicas": "1",
            "max_replicas": "4",
            "action": "refresh",
        },
    ).content.decode()
    estimate = " ".join(re.search(r'<p id="cost-estimate".*?</p>', page, re.S).group(0).split())
    assert "$32.00 per hour</strong> (8 GPUs × $4.0000) at max replicas, which quota reserves" in estimate
    assert "charged for the replicas that run, <strong>$8.00 per hour</strong> at min replicas." in estimate


def test_the_cost_estimate_multiplies_price_units_and_maximum_runtime(client, quotas):
    client.force_login(quotas.alice)
    page = client.post(
        "/workloads/new/training/",
        {
            "kind": "training",
            "team": "vision",
            "offering": "h100-80gb",
            "replicas": "2",
            "gpus_per_replica": "8",
            "max_runtime_seconds": "7200",
            "action": "refresh",
        },
    ).content.decode()
    estimate = " ".join(re.search(r'<p id="cost-estimate".*?</p>', page, re.S).group(0).split())
    assert "$64.00 per hour" in estimate
    assert "16 GPUs × $4.0000" in estimate
    assert "at most <strong>$128.00</strong> over the maximum runtime of 2 h" in estimate
    assert "min replicas" not in estimate
    assert not Workload.objects.exists()
