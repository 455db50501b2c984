from django.urls import path

from providers import views

app_name = "providers"
urlpatterns = [
    path("<uuid:code>/providers/", views.settings_page, name="settings"),
    path("<uuid:code>/providers/credentials/", views.save_credential, name="save_credential"),
    path(
        "<uuid:code>/providers/credentials/<uuid:credential>/delete/", views.delete_credential, name="delete_credential"
    ),
    path("<uuid:code>/providers/credentials/<uuid:credential>/test/", views.test_connection, name="test_connection"),
    path("<uuid:code>/providers/allowlist/", views.allow, name="allow"),
    path("<uuid:code>/providers/allowlist/<str:provider>/delete/", views.disallow, name="disallow"),
]
