from allauth.account.decorators import secure_admin_login
from django.contrib import admin
from django.urls import include, path

from experiments import health, metrics_view
from prbench.api import api

# The admin signs in through allauth's login, whose failure limits are counted in the shared
# Redis cache: the admin's own login form has no limit at all (40 wrong passwords, then the
# right one, used to be accepted).
admin.site.login = secure_admin_login(admin.site.login)  # type: ignore[method-assign]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view.metrics, name="metrics"),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("orgs/", include("orgs.urls")),
    path("orgs/", include("providers.urls")),
    # Before experiments: its runs/<code>/<action>/ would take runs/<code>/pairwise/.
    path("", include("leaderboards.urls")),
    path("", include("datasets.urls")),
    path("", include("experiments.urls")),
]
