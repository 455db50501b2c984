from django.urls import path

from orgs import views

app_name = "orgs"
urlpatterns = [
    path("<uuid:code>/switch/", views.switch_org, name="switch"),
    path("<uuid:code>/members/", views.members, name="members"),
]
