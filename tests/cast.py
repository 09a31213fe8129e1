"""The test cast. Every test that needs people uses these four.

- alice: member of vision; a data scientist who runs notebooks.
- bob: team admin of nlp; manages presets and files quota requests for nlp.
- carol: member of both vision and nlp.
- admin: platform admin (staff); sees every team, approves requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model

from portal.models import Membership, Team

PASSWORD = "test-password-123"


@dataclass
class Cast:
    vision: Team
    nlp: Team
    alice: object
    bob: object
    carol: object
    admin: object


def make_cast() -> Cast:
    User = get_user_model()
    vision = Team.objects.create(slug="vision", name="Computer Vision")
    nlp = Team.objects.create(slug="nlp", name="Natural Language Processing")
    alice = User.objects.create_user("alice", "alice@example.com", PASSWORD)
    bob = User.objects.create_user("bob", "bob@example.com", PASSWORD)
    carol = User.objects.create_user("carol", "carol@example.com", PASSWORD)
    admin = User.objects.create_user("admin", "admin@example.com", PASSWORD, is_staff=True, is_superuser=True)
    Membership.objects.create(user=alice, team=vision, role=Membership.MEMBER)
    Membership.objects.create(user=bob, team=nlp, role=Membership.TEAM_ADMIN)
    Membership.objects.create(user=carol, team=vision, role=Membership.MEMBER)
    Membership.objects.create(user=carol, team=nlp, role=Membership.MEMBER)
    return Cast(vision, nlp, alice, bob, carol, admin)
