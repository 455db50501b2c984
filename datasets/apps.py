from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """The task supply: datasets and their tasks, imported, uploaded, mined and checked."""

    name = "datasets"
    default_auto_field = "django.db.models.BigAutoField"
