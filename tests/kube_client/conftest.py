from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, Configuration

from jobs.kube.client import Cluster
from tests.kube_client.fake_api import FakeApi


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    api = FakeApi().start()
    yield api
    api.stop()


@pytest.fixture
def cluster(fake_api: FakeApi) -> Iterator[Cluster]:
    """A Cluster on a plain ApiClient, as a test or the sandbox harness would hand one over."""
    with Cluster(ApiClient(Configuration(host=fake_api.url)), request_timeout=1) as cluster:
        yield cluster
