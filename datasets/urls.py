from django.urls import path

from datasets import agent_archive, views

app_name = "datasets"
urlpatterns = [
    path("datasets/", views.dataset_list, name="list"),
    path("datasets/<uuid:code>/", views.dataset_detail, name="detail"),
    path("datasets/<uuid:code>/environments/", views.dataset_environments, name="environments"),
    path("datasets/<uuid:code>/environments/recipe/", views.environment_recipe, name="environment_recipe"),
    path("datasets/<uuid:code>/environments/build/", views.environments_build, name="environments_build"),
    path("datasets/<uuid:code>/environments/<slug:key>/", views.environment_log, name="environment_log"),
    path("datasets/import/", views.upload_new, name="upload_new"),
    path("datasets/imports/<uuid:code>/", views.upload_detail, name="upload"),
    path("datasets/imports/<uuid:code>/confirm/", views.upload_confirm, name="upload_confirm"),
    path("datasets/imports/<uuid:code>/retry/", views.upload_retry, name="upload_retry"),
    path("datasets/imports/<uuid:code>/discard/", views.upload_discard, name="upload_discard"),
    path("datasets/mine/", views.mining_new, name="mining_new"),
    path("datasets/mining/<uuid:code>/", views.mining_detail, name="mining"),
    path("datasets/mining/<uuid:code>/retry/", views.mining_retry, name="mining_retry"),
    # A team's agent service fetches its task's tree here (the http_agent provider); no login.
    path("agent-archive/<str:token>/", agent_archive.agent_archive, name="agent_archive"),
]
