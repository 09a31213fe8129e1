"""`python manage.py cluster_check`: can the portal reach its cluster, and is everything it needs installed?

Exit status 1 when the cluster is unreachable or a required kind is missing, so the
command can gate a deployment or a CI job; missing optional kinds are listed but pass.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from jobs.kube.client import Cluster, ClusterCheck


class Command(BaseCommand):
    help = "Check that the Kubernetes cluster is reachable and serves the kinds the portal needs."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = Cluster.from_settings()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc), returncode=1) from exc
        from jobs.lifecycle import queueing

        with cluster:
            result = cluster.check(queueing())
        self.report(result)
        if not result.reachable:
            raise CommandError(f"cluster at {result.url} is unreachable: {result.error}", returncode=1)
        if result.missing_required:
            names = ", ".join(f"{k.kind} ({k.api_version})" for k in result.missing_required)
            raise CommandError(f"required kinds missing: {names}", returncode=1)
        if result.error:
            raise CommandError(f"discovery failed: {result.error}", returncode=1)

    def report(self, result: ClusterCheck) -> None:
        if not result.reachable:
            self.stdout.write(f"cluster: {result.url}: unreachable")
            return
        self.stdout.write(f"cluster: {result.url}: reachable, Kubernetes {result.server_version}")
        kind_width = max(len(k.info.kind) for k in result.kinds)
        version_width = max(len(k.info.api_version) for k in result.kinds)
        for check in result.kinds:
            state = "installed" if check.installed else "MISSING"
            need = "required" if check.required else "optional"
            self.stdout.write(
                f"  {state:<9}  {check.info.kind:<{kind_width}}  {check.info.api_version:<{version_width}}  {need}"
            )
        if result.missing_required:
            self.stdout.write("missing required: " + ", ".join(k.kind for k in result.missing_required))
        if result.missing_optional:
            self.stdout.write("missing optional: " + ", ".join(k.kind for k in result.missing_optional))
        if not result.missing_required and not result.missing_optional:
            self.stdout.write("all kinds installed")
