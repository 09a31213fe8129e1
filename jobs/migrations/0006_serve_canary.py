from django.db import migrations, models


def name_running_canaries(apps, schema_editor):
    """Before ``canary_storage_uri`` a rollout overwrote ``storage_uri`` with the canary's version
    and kept only the percentage (Knative: the latest revision takes the share, the previous one
    the rest). The previous version is unknown, so such a canary names the version it serves on
    both sides: the built InferenceService stays as it is, and promote or roll back ends it (and
    gives back the quota its pods hold)."""
    Workload = apps.get_model("jobs", "Workload")
    Workload.objects.filter(canary_traffic_percent__isnull=False, canary_storage_uri="").update(
        canary_storage_uri=models.F("storage_uri")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0005_serve_deployment_mode"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="canary_storage_uri",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name="workload",
            name="cluster_traffic",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(name_running_canaries, migrations.RunPython.noop),
    ]
