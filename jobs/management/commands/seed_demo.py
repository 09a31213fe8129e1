from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal.models import Membership, Team
from quotas.requests import set_quota

# The demo cast: who may do what.
USERS = {
    "alice": {"teams": {"vision": Membership.MEMBER}},  # a data scientist in vision
    "bob": {"teams": {"nlp": Membership.TEAM_ADMIN}},  # runs the nlp team
    "carol": {"teams": {"vision": Membership.MEMBER, "nlp": Membership.MEMBER}},  # works with both
    "admin": {"teams": {}, "staff": True},  # the platform admin
}
TEAMS = {"vision": "Computer Vision", "nlp": "Natural Language Processing"}
# (guaranteed, limit) per GPU class: enough to try every offering of the demo profile.
QUOTAS = {
    "vision": {"H100-80GB": (4, 8), "A100-80GB": (1, 2), "L4": (1, 2)},
    "nlp": {"H100-80GB": (8, 12), "A100-80GB": (1, 1), "L4": (2, 4)},
}


class Command(BaseCommand):
    # It lives in jobs, the app that may import both portal (teams) and quotas.
    help = "Create the demo organisation with quotas (idempotent). Development only."

    def handle(self, *args, **options):
        if not settings.DEMO_PASSWORD:
            raise CommandError("seed_demo is for development; there is no demo password in production")
        call_command("load_catalog", stdout=self.stdout)
        with transaction.atomic():
            teams = {}
            for slug, name in TEAMS.items():
                teams[slug], _ = Team.objects.get_or_create(slug=slug, defaults={"name": name})
            User = get_user_model()
            for username, spec in USERS.items():
                user, created = User.objects.get_or_create(
                    username=username, defaults={"email": f"{username}@example.com"}
                )
                if created:
                    user.set_password(settings.DEMO_PASSWORD)
                if spec.get("staff"):
                    user.is_staff = user.is_superuser = True
                user.save()
                for slug, role in spec["teams"].items():
                    Membership.objects.update_or_create(user=user, team=teams[slug], defaults={"role": role})
            admin = User.objects.get(username="admin")
            for slug, classes in QUOTAS.items():
                for gpu_class, (guaranteed, limit) in classes.items():
                    # No change, no audit entry: running this twice changes nothing.
                    set_quota(teams[slug], gpu_class, Decimal(guaranteed), Decimal(limit), admin, "demo organisation")
        self.stdout.write(
            "demo organisation ready: teams vision, nlp; logins alice, bob, carol, admin "
            f"with password {settings.DEMO_PASSWORD!r}"
        )
