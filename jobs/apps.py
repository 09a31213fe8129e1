from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        from jobs import checks, cluster_status, signals  # noqa: F401  (checks and signals register themselves)
        from jobs.kube.manifests import team_objects
        from jobs.lifecycle import never_fit
        from jobs.specs import TeamRef
        from portal.health import register_check
        from quotas.approvals import set_never_fits_check
        from quotas.cluster import set_team_objects_builder

        # The approvals console previews a team's Queue and ResourceQuota with the same
        # builders the portal applies with; quotas cannot import them itself.
        set_team_objects_builder(lambda team, quota: team_objects(TeamRef(team.slug, team.namespace), quota))
        # The approvals console warns on exceptions for work the cluster could never hold.
        set_never_fits_check(never_fit)
        # /readyz says when the cluster is not answering; portal cannot import us to ask.
        register_check("cluster", cluster_status.readiness, public_reason=True)
