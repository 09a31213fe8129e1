from django.db import migrations, models


def record_the_mode_kserve_chose(apps, schema_editor):
    """Endpoints submitted before the portal named a mode got KServe's install default, which
    upstream ships as Knative ("Serverless"); KServe refuses to change it, so they keep it."""
    Workload = apps.get_model("jobs", "Workload")
    Workload.objects.filter(kind="endpoint", deployment_mode="", submitted_at__isnull=False).update(
        deployment_mode="Knative"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_admit_workload_canary_replicas"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="deployment_mode",
            field=models.CharField(blank=True, max_length=16),
        ),
        migrations.RunPython(record_the_mode_kserve_chose, migrations.RunPython.noop),
    ]
