"""What quotas tells the rest of the portal. quotas never imports jobs; jobs listens here."""

from django.dispatch import Signal

# A platform admin decided a quota exception. Sent after the decision is recorded, inside
# its transaction. kwargs: exception (QuotaException), approved (bool), actor (User).
exception_decided = Signal()

# A team's quota changed (a grant, an expiry, an admin edit): the cluster's copy must follow.
# kwargs: team (Team). Receivers enqueue work with transaction.on_commit.
quota_changed = Signal()
