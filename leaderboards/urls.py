from django.urls import path

from leaderboards import views

app_name = "leaderboards"
urlpatterns = [
    path("runs/<uuid:code>/boards/<str:board>/", views.run_board, name="board"),
    path("runs/<uuid:code>/pairwise/", views.run_pairwise, name="pairwise"),
]
