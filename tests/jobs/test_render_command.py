import pytest
import yaml
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_render_workload_prints_the_manifests_of_a_mig_notebook(cast, catalog, capsys):
    call_command(
        "render_workload",
        "--kind",
        "notebook",
        "--team",
        "vision",
        "--offering",
        "a100-80gb-1g.10gb",
        "--name",
        "explore",
        "--image",
        "quay.io/jupyter/pytorch-notebook:2024-12-02",
    )
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    container = objects[-1]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"


def test_render_workload_names_the_bad_field(cast, catalog):
    with pytest.raises(CommandError, match="image: registry 'evil.io' is not allowed"):
        call_command(
            "render_workload",
            "--kind",
            "notebook",
            "--team",
            "vision",
            "--offering",
            "h100-80gb",
            "--image",
            "evil.io/x:1",
        )
