from django.apps import AppConfig


class OrgsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "orgs"

    def ready(self) -> None:
        from allauth.account.signals import user_signed_up

        from orgs.actions import do_create_personal_org

        def create_personal_org(request, user, **kwargs):
            do_create_personal_org(user)

        user_signed_up.connect(create_personal_org, dispatch_uid="orgs.create_personal_org")
