from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "providers"

    def ready(self) -> None:
        from prbench.redaction import install_log_record_factory
        from providers import signals  # noqa: F401  (connects the receivers)

        # Every log record, whichever handler gets it, loses keys (see prbench/redaction.py).
        install_log_record_factory()
