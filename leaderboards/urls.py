from django.urls import path

from leaderboards import views

app_name = "leaderboards"
urlpatterns = [
    path("runs/<uuid:code>/boards/<str:board>/", views.run_board, name="board"),
    path("runs/<uuid:code>/pairwise/", views.run_pairwise, name="pairwise"),
    path("runs/<uuid:code>/versus/<uuid:other>/", views.run_versus, name="versus"),
    path("leaderboard/", views.org_board, name="org_board"),
]
