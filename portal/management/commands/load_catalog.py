from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.catalog import sync_catalog
from portal.cluster_profile import ProfileError, load_profile


class Command(BaseCommand):
    help = "Load the offerings of a cluster profile into the GPU catalog."

    def add_arguments(self, parser):
        parser.add_argument("--profile", default=str(settings.CLUSTER_PROFILE), help="cluster profile YAML")

    def handle(self, *args, profile, **options):
        try:
            parsed = load_profile(profile)
        except ProfileError as exc:
            raise CommandError(str(exc)) from None
        changes = sync_catalog(parsed)
        self.stdout.write(
            f"catalog from profile {parsed.name!r}: {len(changes.created)} created, "
            f"{len(changes.updated)} updated, {len(changes.deactivated)} deactivated"
        )
