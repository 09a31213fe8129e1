"""The notebook request form: a default image with a picker, notebook examples, an error summary."""

import html
import re

import pytest
from django.core.checks import run_checks

from jobs.models import Workload
from tests.ui.test_request_form import notebook_input

pytestmark = pytest.mark.django_db


def field_tag(page: str, name: str) -> str:
    match = re.search(rf'<(input|textarea)[^>]*name="{name}"[^>]*>', page)
    assert match, name
    return match.group(0)


def test_a_new_notebook_starts_from_the_default_image_and_offers_the_platforms_images(client, quotas, settings):
    settings.NOTEBOOK_IMAGES = [
        "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.10.0",
        "quay.io/jupyter/pytorch-notebook:2024-12-02",
    ]
    client.force_login(quotas.alice)
    page = client.get("/workloads/new/notebook/").content.decode()
    image = field_tag(page, "image")
    assert 'value="ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.10.0"' in image
    assert 'list="notebook-images"' in image
    datalist = re.search(r'<datalist id="notebook-images">(.*?)</datalist>', page, re.S).group(1)
    assert re.findall(r'<option value="([^"]+)">', datalist) == settings.NOTEBOOK_IMAGES


def test_a_request_again_keeps_its_own_image_over_the_default(client, notebook, settings):
    assert notebook.image != settings.NOTEBOOK_IMAGES[0]
    client.force_login(notebook.created_by)
    page = client.get(f"/workloads/new/notebook/?from={notebook.pk}").content.decode()
    assert f'value="{notebook.image}"' in field_tag(page, "image")


def test_training_and_endpoint_forms_have_no_image_picker(client, quotas):
    client.force_login(quotas.alice)
    for kind in ("training", "endpoint"):
        page = client.get(f"/workloads/new/{kind}/").content.decode()
        assert "<datalist" not in page, kind
        assert "value=" not in field_tag(page, "image"), kind


def test_the_notebook_form_shows_no_training_examples(client, quotas):
    client.force_login(quotas.alice)
    page = client.get("/workloads/new/notebook/").content.decode()
    for training_example in ("torchrun", "--epochs", "nvcr.io/nvidia/pytorch", "WANDB_MODE"):
        assert training_example not in page, training_example
    assert "Empty: the image starts Jupyter" in html.unescape(page)
    training = client.get("/workloads/new/training/").content.decode()
    assert 'placeholder="torchrun train.py"' in training


def test_the_error_summary_lists_every_field_error_with_its_label_and_a_link_to_the_field(client, quotas):
    client.force_login(quotas.alice)
    page = client.post(
        "/workloads/new/notebook/",
        notebook_input(name="Bad_Name", image="ubuntu", offering="tpu-v5", labels="not a pair"),
    ).content.decode()
    summary = re.search(r'<div class="errors error-summary".*?</div>', page, re.S)
    assert summary, "no error summary above the form"
    assert summary.start() < page.index('name="name"'), "the summary comes before the fields"
    items = [
        " ".join(html.unescape(re.sub(r"<[^>]+>", "", li)).split())
        for li in re.findall(r"<li>(.*?)</li>", summary.group(0), re.S)
    ]
    assert "4 things stop this request" in summary.group(0)
    assert [item.split(":")[0] for item in items] == ["Name", "Offering", "Image", "Labels"]
    assert items[0].startswith("Name: must start with a lowercase letter")
    assert items[1].startswith("Offering: unknown offering 'tpu-v5'")
    links = re.findall(r'<a href="#([^"]+)">', summary.group(0))
    assert links == ["id_name", "offering-picker", "id_image", "id_labels"]
    for anchor in links:
        assert f'id="{anchor}"' in page, anchor
    assert not Workload.objects.exists()


def test_a_refusal_that_names_no_field_is_in_the_summary_without_a_label(client, quotas):
    client.force_login(quotas.alice)
    page = client.post(
        "/workloads/new/notebook/", notebook_input(offering="h100-80gb", gpus_per_replica="4")
    ).content.decode()
    summary = re.search(r'<div class="errors error-summary".*?</div>', page, re.S).group(0)
    assert "One thing stops this request" in summary
    assert re.search(r"<li>Over quota: ", summary)


def test_a_valid_form_shows_no_summary(client, quotas):
    client.force_login(quotas.alice)
    page = client.get("/workloads/new/notebook/").content.decode()
    assert "error-summary" not in page


def test_a_given_notebook_image_outside_the_allowed_registries_fails_the_start_up_check(settings):
    settings.NOTEBOOK_IMAGES_GIVEN = True
    settings.NOTEBOOK_IMAGES = ["registry.example.com/jupyter:1", "ubuntu"]
    messages = {m.id: m.msg for m in run_checks() if m.id.startswith("jobs.")}
    assert "is not from an allowed registry" in messages["jobs.E003"]
    assert "'ubuntu'" in messages["jobs.E002"]


def test_narrowing_the_registries_offers_only_the_default_images_they_admit(client, quotas, settings):
    settings.ALLOWED_IMAGE_REGISTRIES = ["nvcr.io", "quay.io/jupyter"]
    assert [m for m in run_checks() if m.id.startswith("jobs.")] == []
    client.force_login(quotas.alice)
    page = client.get("/workloads/new/notebook/").content.decode()
    assert 'value="quay.io/jupyter/pytorch-notebook:2024-12-02"' in field_tag(page, "image")
    assert "ghcr.io/kubeflow" not in page
    settings.ALLOWED_IMAGE_REGISTRIES = ["nvcr.io"]
    assert [m.id for m in run_checks() if m.id.startswith("jobs.")] == ["jobs.W001"]


def test_the_default_notebook_images_pass_the_start_up_check():
    assert [m for m in run_checks() if m.id.startswith("jobs.")] == []
