"""Print the Kubernetes objects a request would become, without creating anything."""

import json

import yaml
from django.core.management.base import BaseCommand, CommandError

from jobs import lifecycle
from jobs.kube.manifests import workload_objects
from jobs.specs import SpecError
from portal.models import Team


class Command(BaseCommand):
    help = (
        "Render the manifests of a workload request, e.g. "
        "render_workload --kind notebook --team vision --offering a100-80gb-1g.10gb --name explore "
        "--image quay.io/jupyter/pytorch-notebook:2024-12-02"
    )

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True)
        parser.add_argument("--kind", required=True, choices=["notebook", "training", "endpoint"])
        parser.add_argument("--offering", required=True)
        parser.add_argument("--name", default="preview")
        parser.add_argument("--image")
        parser.add_argument("--gpus", type=int, dest="gpus_per_replica")
        parser.add_argument("--replicas", type=int, help="training: nodes")
        parser.add_argument("--min-replicas", type=int, dest="min_replicas")
        parser.add_argument("--max-replicas", type=int, dest="max_replicas")
        parser.add_argument("--framework", choices=["torch", "mpi", "custom"])
        parser.add_argument("--model-format", dest="model_format")
        parser.add_argument("--storage-uri", dest="storage_uri")
        parser.add_argument("--workspace-gib", type=int, dest="workspace_gib")
        parser.add_argument("--command", nargs="+", help="the container command, one item per argument")
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="FIELD=JSON",
            help='any other request field, its value as JSON, e.g. --set \'env={"A": "1"}\'',
        )
        parser.add_argument("--json", action="store_true", help="print JSON instead of YAML")

    def handle(self, *args, **opts):
        team = Team.objects.filter(slug=opts["team"]).first()
        if team is None:
            raise CommandError(f"team: no team named {opts['team']!r}")
        fields = (
            "kind",
            "offering",
            "name",
            "image",
            "gpus_per_replica",
            "replicas",
            "min_replicas",
            "max_replicas",
            "framework",
            "model_format",
            "storage_uri",
            "workspace_gib",
            "command",
        )
        data = {k: opts[k] for k in fields if opts.get(k) is not None}
        if "gpus_per_replica" not in data:
            data["gpus_per_replica"] = 0 if opts["offering"] == "cpu" else 1
        for item in opts["set"]:
            key, sep, raw = item.partition("=")
            if not sep:
                raise CommandError(f"--set {item!r}: use FIELD=JSON")
            try:
                data[key] = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise CommandError(f"--set {key}: not JSON: {exc}") from None
        try:
            spec = lifecycle.validate(data, team)
        except SpecError as exc:
            raise CommandError("; ".join(f"{k}: {m}" for k, ms in exc.errors.items() for m in ms)) from None
        objects = workload_objects(spec)
        if opts["json"]:
            self.stdout.write(json.dumps(objects, indent=2))
        else:
            self.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
