from decimal import ROUND_CEILING, Decimal

from django.db import migrations, models

ACTIVE = ("queued", "submitted", "running")
MPI_LAUNCHER = (Decimal(1), Decimal(2 * 2**30))  # jobs.kube.manifests.MPI_LAUNCHER_RESOURCES when written
SIX_PLACES = Decimal("0.000001")


def hold_what_runs(apps, schema_editor):
    """Active workloads hold their pods' CPU and memory, so a CPU quota set later counts them."""
    from jobs.specs import parse_quantity

    Workload = apps.get_model("jobs", "Workload")
    for w in Workload.objects.filter(state__in=ACTIVE, deleted_at__isnull=True).iterator():
        pods = w.max_replicas if w.kind == "endpoint" else w.replicas
        try:
            cpu, memory = parse_quantity(w.cpu) * pods, parse_quantity(w.memory) * pods
        except ValueError:
            continue  # a value from before validation; the re-count leaves it out
        if w.kind == "training" and w.framework == "mpi":
            cpu, memory = cpu + MPI_LAUNCHER[0], memory + MPI_LAUNCHER[1]
        Workload.objects.filter(pk=w.pk).update(
            cpu_charge=cpu.quantize(SIX_PLACES, rounding=ROUND_CEILING),
            memory_charge=(memory / 2**30).quantize(SIX_PLACES, rounding=ROUND_CEILING),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_train_workload_failure"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="cpu_charge",
            field=models.DecimalField(decimal_places=6, default=0, max_digits=12),
        ),
        migrations.AddField(
            model_name="workload",
            name="memory_charge",
            field=models.DecimalField(decimal_places=6, default=0, max_digits=12),
        ),
        migrations.RunPython(hold_what_runs, migrations.RunPython.noop),
    ]
