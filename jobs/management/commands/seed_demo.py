from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal.models import Membership, Team
from quotas.models import Quota
from quotas.requests import set_quota

# The demo cast: who may do what.
USERS = {
    "alice": {"teams": {"vision": Membership.MEMBER}},  # a data scientist in vision
    "bob": {"teams": {"nlp": Membership.TEAM_ADMIN}},  # runs the nlp team
    "carol": {"teams": {"vision": Membership.MEMBER, "nlp": Membership.MEMBER}},  # works with both
    "admin": {"teams": {}, "staff": True},  # the platform admin
}
TEAMS = {"vision": "Computer Vision", "nlp": "Natural Language Processing"}
# (guaranteed, limit) per GPU class, and of CPU cores and memory GiB: enough to try
# every offering of the demo profile (a training run asks 8 cores and 32 GiB per replica).
QUOTAS = {
    "vision": {"H100-80GB": (4, 8), "A100-80GB": (1, 2), "L4": (1, 2), "cpu": (32, 64), "memory": (128, 256)},
    "nlp": {"H100-80GB": (8, 12), "A100-80GB": (1, 1), "L4": (2, 4), "cpu": (64, 128), "memory": (256, 512)},
}


class Command(BaseCommand):
    # It lives in jobs, the app that may import both portal (teams) and quotas.
    help = "Create what is missing of the demo organisation; never changes what exists. Development only."

    def handle(self, *args, **options):
        if not settings.DEMO_PASSWORD:
            raise CommandError("seed_demo is for development; there is no demo password in production")
        call_command("load_catalog", stdout=self.stdout)
        created = seed()
        summary = ", ".join(f"{len(names)} {what} ({', '.join(names)})" for what, names in created.items() if names)
        self.stdout.write(f"demo organisation: created {summary}" if summary else "demo organisation: all present")
        self.stdout.write(
            "teams vision, nlp; logins alice, bob, carol, admin "
            f"with password {settings.DEMO_PASSWORD!r} (unless changed since)"
        )


@transaction.atomic
def seed() -> dict[str, list[str]]:
    """Create the teams, users, memberships and quotas of the demo that do not exist yet.

    `make run` runs this at every start, so it only ever adds: a quota an admin approved,
    a role or a password someone changed stays as it is, and nothing is audited when
    nothing is created. Something deleted on purpose comes back (it is missing again).
    Returns what was created, by kind.
    """
    created: dict[str, list[str]] = {"teams": [], "users": [], "memberships": [], "quotas": []}
    teams = {}
    for slug, name in TEAMS.items():
        teams[slug], made = Team.objects.get_or_create(slug=slug, defaults={"name": name})
        if made:
            created["teams"].append(slug)
    User = get_user_model()
    for username, spec in USERS.items():
        staff = bool(spec.get("staff"))
        user, made = User.objects.get_or_create(
            username=username,
            defaults={"email": f"{username}@example.com", "is_staff": staff, "is_superuser": staff},
        )
        if made:
            user.set_password(settings.DEMO_PASSWORD)
            user.save(update_fields=["password"])
            created["users"].append(username)
        for slug, role in spec["teams"].items():
            if Membership.objects.get_or_create(user=user, team=teams[slug], defaults={"role": role})[1]:
                created["memberships"].append(f"{username} in {slug}")
    admin = User.objects.get(username="admin")
    for slug, classes in QUOTAS.items():
        present = set(Quota.objects.filter(team=teams[slug]).values_list("gpu_class", flat=True))
        for gpu_class, (guaranteed, limit) in classes.items():
            if gpu_class in present:
                continue
            set_quota(teams[slug], gpu_class, Decimal(guaranteed), Decimal(limit), admin, "demo organisation")
            created["quotas"].append(f"{slug} {gpu_class}")
    return created
