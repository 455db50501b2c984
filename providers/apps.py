from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "providers"

    def ready(self) -> None:
        from providers import signals  # noqa: F401  (connects the receivers)
