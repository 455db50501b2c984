from django.apps import AppConfig


class LeaderboardsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "leaderboards"

    def ready(self) -> None:
        from leaderboards import sql  # noqa: F401  (registers the SQLite percentile aggregate)
