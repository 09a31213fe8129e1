"""Print or apply the cluster-scoped objects the portal relies on.

The PriorityClasses and the portal's torch ClusterTrainingRuntimes: an admin installs
them once (the reconcile also re-applies them when they go missing).
"""

import yaml
from django.core.management.base import BaseCommand

from jobs.kube.client import Cluster
from jobs.kube.manifests import cluster_objects
from jobs.lifecycle import queueing


class Command(BaseCommand):
    help = "Print (default) or --apply the PriorityClasses and ClusterTrainingRuntimes the portal uses."

    def add_arguments(self, parser):
        parser.add_argument("--apply", action="store_true", help="apply them to the configured cluster")

    def handle(self, *args, apply, **options):
        objects = cluster_objects(queueing())
        if not apply:
            self.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
            return
        with Cluster.from_settings() as cluster:
            cluster.apply_all(objects)
        for obj in objects:
            self.stdout.write(f"applied {obj['kind']}/{obj['metadata']['name']}")
