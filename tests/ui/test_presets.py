import html
import re

import pytest

from jobs import lifecycle
from jobs.models import Preset
from tests.ui.conftest import NOTEBOOK_IMAGE

pytestmark = pytest.mark.django_db


def preset_input(**overrides) -> dict:
    data = {
        "kind": "notebook",
        "team": "nlp",
        "name": "",  # a preset has no workload name
        "offering": "a100-80gb-1g.10gb",
        "image": NOTEBOOK_IMAGE,
        "env": "HF_HOME=/cache",
        "command": "start-notebook.py --debug",
        "workspace_gib": "20",
        "preset_name": "PyTorch on a slice",
        "action": "save-preset",
    }
    data.update(overrides)
    return data


@pytest.fixture
def preset(quotas):
    return Preset.objects.create(
        team=quotas.nlp,
        name="PyTorch on a slice",
        kind="notebook",
        request={"offering": "a100-80gb-1g.10gb", "image": NOTEBOOK_IMAGE, "env": {"HF_HOME": "/cache"}},
        created_by=quotas.bob,
    )


def test_a_team_admin_saves_the_request_form_as_a_preset(client, quotas):
    client.force_login(quotas.bob)
    response = client.post("/workloads/new/notebook/", preset_input())
    preset = Preset.objects.get()
    assert response["Location"] == f"/workloads/new/notebook/?preset={preset.pk}"
    assert (preset.team, preset.kind, preset.name, preset.created_by) == (
        quotas.nlp,
        "notebook",
        "PyTorch on a slice",
        quotas.bob,
    )
    assert preset.request == {
        "offering": "a100-80gb-1g.10gb",
        "image": NOTEBOOK_IMAGE,
        "command": ["start-notebook.py", "--debug"],
        "env": {"HF_HOME": "/cache"},
        "workspace_gib": 20,
    }
    assert not quotas.nlp.workloads.exists()


def test_a_preset_is_validated_before_it_is_saved(client, quotas):
    client.force_login(quotas.bob)
    page = client.post("/workloads/new/notebook/", preset_input(env="CUDA_VISIBLE_DEVICES=0")).content.decode()
    assert "CUDA_VISIBLE_DEVICES cannot be set" in html.unescape(page)
    assert not Preset.objects.exists()


def test_a_member_who_is_not_team_admin_cannot_save_a_preset(client, quotas):
    client.force_login(quotas.carol)
    page = client.post("/workloads/new/notebook/", preset_input()).content.decode()
    assert "Only a team admin of nlp can save presets." in page
    assert not Preset.objects.exists()


def test_members_see_their_teams_presets_and_start_from_one(client, quotas, preset):
    client.force_login(quotas.carol)
    page = client.get("/workloads/new/notebook/").content.decode()
    assert f'href="?preset={preset.pk}"' in page
    filled = html.unescape(client.get(f"/workloads/new/notebook/?preset={preset.pk}").content.decode())
    assert f'value="{NOTEBOOK_IMAGE}"' in filled
    assert "HF_HOME=/cache</textarea>" in filled
    assert re.search(r'id="offering-a100-80gb-1g.10gb"[^>]*checked', filled)
    assert re.search(r'<option value="nlp" selected>', filled)


def test_a_preset_of_another_kind_sends_the_user_to_the_right_form(client, quotas, preset):
    client.force_login(quotas.carol)
    response = client.get(f"/workloads/new/training/?preset={preset.pk}")
    assert response["Location"] == f"/workloads/new/notebook/?preset={preset.pk}"


def test_another_teams_preset_is_a_404(client, quotas, preset):
    client.force_login(quotas.alice)
    assert client.get(f"/workloads/new/notebook/?preset={preset.pk}").status_code == 404
    assert client.post(f"/presets/{preset.pk}/delete/", {"confirmed": "yes"}).status_code == 404
    assert "PyTorch on a slice" not in client.get("/presets/").content.decode()
    assert "PyTorch on a slice" not in client.get("/workloads/new/notebook/").content.decode()


def test_a_team_admin_saves_a_workload_as_a_preset_from_its_page(client, quotas):
    workload = lifecycle.request_workload(
        quotas.bob,
        quotas.nlp,
        {"kind": "notebook", "name": "nb", "offering": "l4-shared", "image": NOTEBOOK_IMAGE, "args": ["--x", "a b"]},
    )
    client.force_login(quotas.bob)
    assert "Save as preset" in client.get(f"/workloads/{workload.pk}/").content.decode()
    client.post(f"/workloads/{workload.pk}/save-preset/", {"preset_name": "Shared L4"})
    preset = Preset.objects.get()
    assert preset.name == "Shared L4" and preset.request["offering"] == "l4-shared"
    assert preset.request["args"] == ["--x", "a b"] and "name" not in preset.request
    client.force_login(quotas.carol)
    assert "Save as preset" not in client.get(f"/workloads/{workload.pk}/").content.decode()
    assert client.post(f"/workloads/{workload.pk}/save-preset/", {"preset_name": "Mine"}).status_code == 403


def test_a_preset_name_is_unique_within_the_team(client, quotas, preset):
    client.force_login(quotas.bob)
    page = client.post("/workloads/new/notebook/", preset_input()).content.decode()
    assert "team nlp already has a preset named" in html.unescape(page)
    assert Preset.objects.count() == 1


def test_team_admins_delete_presets_and_members_may_not(client, quotas, preset):
    client.force_login(quotas.carol)
    assert 'action="/presets/' not in client.get("/presets/").content.decode()
    assert client.post(f"/presets/{preset.pk}/delete/", {"confirmed": "yes"}).status_code == 403
    client.force_login(quotas.bob)
    assert client.post(f"/presets/{preset.pk}/delete/").status_code == 200  # the confirm page first
    assert Preset.objects.exists()
    assert client.post(f"/presets/{preset.pk}/delete/", {"confirmed": "yes"})["Location"] == "/presets/"
    assert not Preset.objects.exists()
