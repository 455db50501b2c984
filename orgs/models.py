import uuid

from django.conf import settings
from django.db import models


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
