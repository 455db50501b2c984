from django.apps import AppConfig


class OrgsConfig(AppConfig):
    """No sign-up signal: a new user is sent to the onboarding page by ``access_current_org``
    (orgs/access.py) for as long as they belong to no organisation. That follows from the
    data on every request, so unlike the old weakly-held ``user_signed_up`` receiver (which
    the garbage collector dropped) it cannot silently stop happening."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "orgs"
