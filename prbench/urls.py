from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("orgs/", include("orgs.urls")),
    path("orgs/", include("providers.urls")),
    path("", include("experiments.urls")),
]
