"""The organisations' steps of the recovery sweep (prbench/recovery.py). Both keep their own
clocks (a delivery's next try, ``PRBENCH_AUDIT_KEY_USES_DAYS``), so the sweep's staleness limit
is not theirs to use."""

from __future__ import annotations

from datetime import timedelta

from orgs.audit import prune_key_uses
from orgs.webhook_delivery import sweep_due_deliveries


def send_overdue_webhooks(stale_after: timedelta) -> dict[str, int]:
    """Deliveries overdue with nobody sending them (their job was lost), queued again."""
    return {"webhooks": sweep_due_deliveries()}


def prune_audit_log(stale_after: timedelta) -> dict[str, int]:
    """API key uses older than ``PRBENCH_AUDIT_KEY_USES_DAYS``, deleted."""
    return {"audit_pruned": prune_key_uses()}
