import hashlib
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from prbench import crypto


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


WRITE_ROLES = (Role.OWNER, Role.ADMIN, Role.MEMBER)
MANAGE_ROLES = (Role.OWNER, Role.ADMIN)


class Organization(models.Model):
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="memberships")
    org = models.ForeignKey(Organization, models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "org"], name="one_membership_per_org")]
        ordering = ["org__name"]

    def __str__(self) -> str:
        return f"{self.user} in {self.org} ({self.role})"

    @property
    def can_write(self) -> bool:
        return self.role in WRITE_ROLES

    @property
    def can_manage(self) -> bool:
        return self.role in MANAGE_ROLES


# Long enough to survive a weekend in someone's inbox, short enough that a forgotten link
# does not stay a way into the organisation.
INVITATION_LIFETIME = timedelta(days=7)


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REVOKED = "revoked", "Revoked"
    EXPIRED = "expired", "Expired"


class InvitationQuerySet(models.QuerySet["Invitation"]):
    def pending(self) -> "InvitationQuerySet":
        return self.filter(accepted_at=None, revoked_at=None, expires_at__gt=timezone.now())


class Invitation(models.Model):
    """A single-use offer of a role in an organisation, addressed to an email address.

    Only the SHA-256 of the token travels into the database: the link is shown once to the
    inviter and mailed to the invitee, so a database dump or the admin never holds a usable link.
    """

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey(Organization, models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["org", "email"])]

    def __str__(self) -> str:
        return f"{self.email} to {self.org} ({self.role})"

    @staticmethod
    def hash_token(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @property
    def status(self) -> str:
        if self.accepted_at is not None:
            return InvitationStatus.ACCEPTED
        if self.revoked_at is not None:
            return InvitationStatus.REVOKED
        if self.expires_at <= timezone.now():
            return InvitationStatus.EXPIRED
        return InvitationStatus.PENDING


class ApiScope(models.TextChoices):
    """What an API key may do. Scopes are explicit, not nested: a key that starts runs but
    cannot read them would be odd, so the page offers sensible sets, yet each is checked alone."""

    READ = "read", "Read: runs, boards, attempts and exports"
    RUN = "run", "Run: create experiments, import datasets, start and control runs"
    ADMIN = "admin", "Admin: what an organisation admin may do"


API_KEY_PREFIX = "prb_"


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def usable(self) -> "ApiKeyQuerySet":
        now = timezone.now()
        return self.filter(revoked_at=None).filter(models.Q(expires_at=None) | models.Q(expires_at__gt=now))


class ApiKey(models.Model):
    """An organisation's key for the JSON API.

    The key is shown once, when it is made; only its SHA-256 is stored (the key is 32 random
    bytes, so a salted slow hash would add nothing but latency to every request). ``prefix``, the
    key's first characters, is what pages and the audit log show so people can tell keys apart.
    """

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey(Organization, models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Names are how the command line revokes a key: one live key per name.
            models.UniqueConstraint(
                fields=["org", "name"], condition=models.Q(revoked_at=None), name="one_live_api_key_per_name"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.org}"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @property
    def role(self) -> str:
        """The role the access layer treats the key as having: what its widest scope allows."""
        if ApiScope.ADMIN in self.scopes:
            return Role.ADMIN
        if ApiScope.RUN in self.scopes:
            return Role.MEMBER
        return Role.VIEWER

    @property
    def status(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"


class AuditEvent(models.Model):
    """Who did what to an organisation's keys, credentials, allowlist and webhooks, and every
    request an API key made. Written once, never changed; owners read it on the audit page."""

    org = models.ForeignKey(Organization, models.CASCADE, related_name="audit_events")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=64)
    actor_user = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    actor_key = models.ForeignKey(ApiKey, models.SET_NULL, null=True, blank=True, related_name="audit_events")
    # What the action was about, in words a reader recognises ("key ci (prb_1a2b3c4d)", a
    # credential's label): never a secret.
    target = models.CharField(max_length=300, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["org", "-at", "-id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} {self.target}"


class WebhookEvent(models.TextChoices):
    RUN_COMPLETED = "run.completed", "Run completed"
    RUN_FAILED = "run.failed", "Run failed"
    RUN_BUDGET_EXCEEDED = "run.budget_exceeded", "Run budget exceeded"
    PING = "ping", "Test (ping)"


# What a webhook can subscribe to; ``ping`` is sent only by the "Send test" button.
SUBSCRIBABLE_EVENTS = (WebhookEvent.RUN_COMPLETED, WebhookEvent.RUN_FAILED, WebhookEvent.RUN_BUDGET_EXCEEDED)
WEBHOOK_URL_MAX = 500


class Webhook(models.Model):
    """An address the organisation's run events are POSTed to, signed with its own secret.

    The secret signs every body (HMAC-SHA256), so it must be recoverable: it is stored
    encrypted with the provider keys' Fernet keys, shown once when the webhook is created,
    and never rendered again.
    """

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey(Organization, models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=WEBHOOK_URL_MAX)
    events = models.JSONField(default=list, help_text="Event names this webhook receives")
    active = models.BooleanField(default=True)
    secret_encrypted = models.TextField(editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"webhook {str(self.code)[:8]} of {self.org_id}"

    def set_secret(self, secret: str) -> None:
        self.secret_encrypted = crypto.encrypt(secret)

    def secret(self) -> str:
        return crypto.decrypt(self.secret_encrypted)

    def wants(self, event: str) -> bool:
        return self.active and event in self.events


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class WebhookDelivery(models.Model):
    """One event for one webhook, and how sending it went. ``code`` is the delivery id the
    receiver sees (X-PRBench-Delivery), the same on every try."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    webhook = models.ForeignKey(Webhook, models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    # What the event is about: the run's public id (a ping's own id). With the constraint
    # below, a run's transition is delivered once however often the code path runs.
    subject = models.UUIDField()
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    # A worker sending it holds it until then; past it (the worker died) it can be sent again.
    claimed_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "event", "subject"], name="one_delivery_per_event_and_subject")
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="webhook_delivery_due")]

    def __str__(self) -> str:
        return f"{self.event} delivery {str(self.code)[:8]} ({self.status})"
