from decimal import Decimal
from unittest import mock

import pytest

from quotas.models import Quota
from tests.jobs.fakes import FakeCluster


@pytest.fixture
def no_celery():
    """Lifecycle calls enqueue tasks; these tests run the reconcile themselves instead."""
    with (
        mock.patch("jobs.tasks.submit_workload.delay"),
        mock.patch("jobs.tasks.teardown_workload.delay"),
        mock.patch("jobs.tasks.apply_team.delay"),
    ):
        yield


@pytest.fixture
def cluster():
    return FakeCluster()


@pytest.fixture
def quotas(cast, catalog):
    """vision: 2 guaranteed / 4 limit H100s and one A100 (its 1g.10gb slices count 1/7)."""
    return {
        "h100": Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=Decimal(2), limit=Decimal(4)),
        "a100": Quota.objects.create(team=cast.vision, gpu_class="A100-80GB", guaranteed=Decimal(1), limit=Decimal(1)),
    }


def notebook(name="nb", offering="a100-80gb-1g.10gb", **extra):
    return {
        "kind": "notebook",
        "name": name,
        "offering": offering,
        "gpus_per_replica": 1,
        "image": "quay.io/jupyter/pytorch-notebook:2024-12-02",
        **extra,
    }


def training(name="train", replicas=2, gpus=1, **extra):
    return {
        "kind": "training",
        "name": name,
        "offering": "h100-80gb",
        "framework": "torch",
        "replicas": replicas,
        "gpus_per_replica": gpus,
        "image": "nvcr.io/nvidia/pytorch:24.10-py3",
        "command": ["torchrun", "train.py"],
        **extra,
    }
