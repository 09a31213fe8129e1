from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

MAX_DAYS = 31


def _moment(name: str, text: str):
    when = parse_datetime(text)
    if when is None or when.tzinfo is None:
        raise CommandError(f"--{name}: {text!r} is not an ISO date-time with a zone (e.g. 2026-03-02T10:00:00Z)")
    return when


class Command(BaseCommand):
    help = (
        "Fill the GPU usage rollups for [--since, --until) from the configured metrics source "
        "(Prometheus keeps history), an hour per transaction. Minutes already stored are replaced."
    )

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="first minute, ISO 8601 with a zone")
        parser.add_argument("--until", required=True, help="end (not included), ISO 8601 with a zone")

    def handle(self, *args, since, until, **options):
        from jobs.kube.client import Cluster
        from usage import sources, telemetry

        start, end = _moment("since", since), _moment("until", until)
        if end <= start:
            raise CommandError("--until: must be after --since")
        if end - start > timedelta(days=MAX_DAYS):
            raise CommandError(f"--until: at most {MAX_DAYS} days after --since per run")
        source = sources.from_settings()
        with Cluster.from_settings() as cluster:
            report = telemetry.backfill(
                source, lambda selector: cluster.list("v1", "Pod", label_selector=selector), start, end
            )
        self.stdout.write(
            f"{report.samples} samples, {report.minute_rows} minute rows ({report.replaced} replaced, "
            f"{report.unattributed} unattributed)"
        )
