"""A stand-in for jobs.kube.client.Cluster for lifecycle unit tests.

It records what would be sent and can be told to fail; the real client is tested
against the sandbox cluster in tests/kube_client and the end-to-end tests.
"""

from __future__ import annotations


class FakeCluster:
    def __init__(self):
        self.applied: list[dict] = []
        self.deleted: list[tuple[str, str, str, str | None]] = []
        self.fail_with: Exception | None = None
        self.objects: dict[tuple[str, str], list[dict]] = {}

    def apply_all(self, objects):
        if self.fail_with is not None:
            raise self.fail_with
        self.applied.extend(objects)
        return list(objects)

    def delete(self, api_version, kind, name, namespace=None):
        self.deleted.append((api_version, kind, name, namespace))
        return True

    def list(self, api_version, kind, *, label_selector="", namespace=None):
        return list(self.objects.get((api_version, kind), []))

    def kinds_applied(self) -> list[str]:
        return [o["kind"] for o in self.applied]
