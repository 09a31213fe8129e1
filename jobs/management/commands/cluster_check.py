"""`python manage.py cluster_check`: can the portal reach its cluster, and is everything it needs installed?

Two parts: the kinds the portal uses (discovery), then the add-ons' configuration
(jobs/preflight.py: KServe, Knative's feature flags, Volcano's scheduler, Kueue,
dcgm-exporter), naming each setting the portal needs that is missing, with the fix.

Exit status 1 when the cluster is unreachable or a required kind is missing, so the
command can gate a deployment or a CI job; missing optional kinds are listed but pass.
Configuration findings pass too unless ``--strict`` is given (an add-on installed under
another namespace or name reads as "not found": say where with the options below).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from jobs import preflight
from jobs.kube.client import Cluster, ClusterCheck
from jobs.kube.errors import ClusterError
from jobs.kube.kinds import CONFIG_OBJECTS
from portal.cluster_profile import ProfileError, load_profile

# What the preflight reads: key -> (apiVersion, kind, name); the namespace comes from the options.
CONFIG_READS = {
    "kserve": ("v1", "ConfigMap", preflight.ISVC_CONFIG[1]),
    "storage": ("serving.kserve.io/v1alpha1", "ClusterStorageContainer", preflight.STORAGE_CONTAINER),
    "knative": ("v1", "ConfigMap", preflight.KNATIVE_FEATURES[1]),
    "volcano": ("v1", "ConfigMap", preflight.VOLCANO_SCHEDULER[1]),
    "kueue": ("v1", "ConfigMap", preflight.KUEUE_MANAGER[1]),
    "dcgm": ("apps/v1", "DaemonSet", ""),
    "dcgm_dra": ("apps/v1", "DaemonSet", ""),
}
DAEMONSET_OPTIONS = {"dcgm": "dcgm_exporter", "dcgm_dra": "dcgm_exporter_dra"}


class Command(BaseCommand):
    help = (
        "Check that the Kubernetes cluster is reachable, serves the kinds the portal needs, and that its "
        "add-ons are configured as the portal needs."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--kserve-namespace", default=preflight.ISVC_CONFIG[0])
        parser.add_argument("--knative-namespace", default=preflight.KNATIVE_FEATURES[0])
        parser.add_argument("--volcano-namespace", default=preflight.VOLCANO_SCHEDULER[0])
        parser.add_argument("--kueue-namespace", default=preflight.KUEUE_MANAGER[0])
        parser.add_argument(
            "--dcgm-exporter",
            default="/".join(preflight.DCGM_EXPORTER),
            metavar="NAMESPACE/NAME",
            help="the dcgm-exporter DaemonSet (default: the GPU Operator's)",
        )
        parser.add_argument(
            "--dcgm-exporter-dra",
            default="/".join(preflight.DCGM_DRA_EXPORTER),
            metavar="NAMESPACE/NAME",
            help="the second dcgm-exporter DaemonSet, for DRA nodes (checked when the profile has time-sliced and "
            "DRA offerings: one exporter cannot attribute both)",
        )
        parser.add_argument(
            "--strict", action="store_true", help="exit 1 when a configuration finding needs attention too"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        exporters = {key: self.daemonset_option(options, option) for key, option in DAEMONSET_OPTIONS.items()}
        try:
            profile = load_profile(settings.CLUSTER_PROFILE)
        except ProfileError as exc:
            raise CommandError(f"PORTAL_CLUSTER_PROFILE: {exc}", returncode=1) from exc
        try:
            cluster = Cluster.from_settings()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc), returncode=1) from exc
        from jobs.lifecycle import queueing

        refs = {
            "kserve": options["kserve_namespace"],
            "knative": options["knative_namespace"],
            "volcano": options["volcano_namespace"],
            "kueue": options["kueue_namespace"],
            **exporters,
        }
        with cluster:
            result = cluster.check(queueing())
            self.report(result)
            if not result.reachable:
                raise CommandError(f"cluster at {result.url} is unreachable: {result.error}", returncode=1)
            objects, unreadable = self.fetch(cluster, refs)
        needs = preflight.portal_needs(profile, settings.TEAM_NAMESPACE_PREFIX)
        findings = preflight.check_all(objects, needs, refs, unreadable)
        self.report_findings(findings)
        if result.missing_required:
            names = ", ".join(f"{k.kind} ({k.api_version})" for k in result.missing_required)
            raise CommandError(f"required kinds missing: {names}", returncode=1)
        if result.error:
            raise CommandError(f"discovery failed: {result.error}", returncode=1)
        attention = [f for f in findings if f.needs_attention]
        if options["strict"] and attention:
            raise CommandError(f"{len(attention)} configuration finding(s) need attention", returncode=1)

    @staticmethod
    def daemonset_option(options: dict[str, Any], option: str) -> tuple[str, str]:
        flag = "--" + option.replace("_", "-")
        namespace, sep, name = options[option].partition("/")
        if not (sep and namespace and name):
            raise CommandError(f"{flag} must be NAMESPACE/NAME, not {options[option]!r}")
        allowed = next(e.names for e in CONFIG_OBJECTS if e.info.kind == "DaemonSet")
        if name not in allowed:
            # The ClusterRole grants get on these names only (jobs/kube/kinds.py CONFIG_OBJECTS).
            names = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
            raise CommandError(f"{flag}: the DaemonSet must be named {names}, not {name!r}")
        return namespace, name

    def fetch(self, cluster: Cluster, refs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """Each configuration object, None when it does not exist; read errors (403, ...) by key."""
        objects: dict[str, Any] = {}
        unreadable: dict[str, str] = {}
        for key, (api_version, kind, name) in CONFIG_READS.items():
            namespace = refs.get(key) if key != "storage" else None
            if key in DAEMONSET_OPTIONS:
                namespace, name = refs[key]
            try:
                objects[key] = cluster.read_config(api_version, kind, name, namespace)
            except ClusterError as exc:
                unreadable[key] = str(exc)
        return objects, unreadable

    def report_findings(self, findings: list[preflight.Finding]) -> None:
        self.stdout.write("add-on configuration (what the portal needs of it):")
        source_width = max(len(f.source) for f in findings)
        for f in findings:
            state = "ok" if f.status == preflight.OK else f.status.upper()
            self.stdout.write(f"  {state:<9}  {f.source:<{source_width}}  {f.setting}: {f.detail}")
            if f.fix:
                self.stdout.write(f"  {'':<9}  {'':<{source_width}}  fix: {f.fix}")
        attention = [f for f in findings if f.needs_attention]
        self.stdout.write(
            f"{len(attention)} configuration finding(s) need attention" if attention else "configuration: all ok"
        )

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
