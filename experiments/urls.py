from django.urls import path

from experiments import views

app_name = "experiments"
urlpatterns = [
    path("", views.home, name="home"),
    path("experiments/", views.experiment_list, name="list"),
    path("experiments/new/", views.experiment_create, name="create"),
    path("experiments/prompt/", views.experiment_prompt, name="prompt_for_dataset"),
    path("experiments/<uuid:code>/", views.experiment_detail, name="detail"),
    path("experiments/<uuid:code>/edit/", views.experiment_edit, name="edit"),
    path("experiments/<uuid:code>/runs/", views.run_start, name="run_start"),
    path("experiments/<uuid:code>/runs/new/", views.run_confirm, name="run_confirm"),
    path("runs/<uuid:code>/", views.run_detail, name="run"),
    path("runs/<uuid:code>/attempts/", views.run_attempts, name="run_attempts"),
    path("runs/<uuid:code>/tasks/<uuid:task_code>/", views.run_task, name="run_task"),
    # Before the actions' pattern, which would take "answers" for an action.
    path("runs/<uuid:code>/answers/", views.run_answers, name="run_answers"),
    path("runs/<uuid:code>/export.<str:format>", views.run_export, name="run_export"),
    path("runs/<uuid:code>/exports/", views.run_exports, name="run_exports"),
    path("exports/<uuid:code>/download/", views.run_export_download, name="run_export_download"),
    path("runs/<uuid:code>/<str:action>/", views.run_action, name="run_action"),
    path("attempts/<uuid:code>/", views.attempt_detail, name="attempt"),
    path(
        "attempts/<uuid:code>/turns/<int:turn>/calls/<int:number>/output/",
        views.attempt_tool_output,
        name="attempt_tool_output",
    ),
]
