from django.apps import AppConfig


class LeaderboardsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "leaderboards"

    def ready(self) -> None:
        from leaderboards import hooks, sql  # noqa: F401  (sql registers the SQLite percentile aggregate)

        hooks.connect()  # experiments tells the boards what changed, and shows them, through these
