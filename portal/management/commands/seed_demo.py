from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal.models import Membership, Team

# The demo cast: who may do what.
USERS = {
    "alice": {"teams": {"vision": Membership.MEMBER}},  # a data scientist in vision
    "bob": {"teams": {"nlp": Membership.TEAM_ADMIN}},  # runs the nlp team
    "carol": {"teams": {"vision": Membership.MEMBER, "nlp": Membership.MEMBER}},  # works with both
    "admin": {"teams": {}, "staff": True},  # the platform admin
}
TEAMS = {"vision": "Computer Vision", "nlp": "Natural Language Processing"}


class Command(BaseCommand):
    help = "Create the demo organisation (idempotent). Development only."

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
        self.stdout.write(
            "demo organisation ready: teams vision, nlp; logins alice, bob, carol, admin "
            f"with password {settings.DEMO_PASSWORD!r}"
        )
