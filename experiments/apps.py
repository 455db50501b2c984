from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ExperimentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experiments"

    def ready(self) -> None:
        post_migrate.connect(_counting_triggers_in_place, sender=self)


def _counting_triggers_in_place(using: str = "default", **kwargs: object) -> None:
    """Django rebuilds a SQLite table to alter it, dropping the triggers that keep the runs'
    counters (experiments/run_counters.py): put them back and recount after every migrate."""
    from django.db import connections

    from experiments import run_counters

    connection = connections[using]
    if "experiments_runcounters" not in connection.introspection.table_names():
        return  # migrated to a point before the counters
    if run_counters.install(connection):
        run_counters.recount(using=using)
