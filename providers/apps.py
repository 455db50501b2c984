from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "providers"

    def ready(self) -> None:
        from providers import signals  # noqa: F401  (connects the receivers)
        from providers.redaction import install_log_record_factory

        # Every log record, whichever handler gets it, loses keys (see providers/redaction.py).
        install_log_record_factory()
