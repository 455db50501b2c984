from django.urls import path

from orgs import views

app_name = "orgs"
urlpatterns = [
    path("welcome/", views.onboarding, name="onboarding"),
    path("invitations/offered/<uuid:code>/accept/", views.accept_offered, name="accept_offered"),
    path("invitations/<str:token>/", views.invitation, name="invitation"),
    path("<uuid:code>/switch/", views.switch_org, name="switch"),
    path("<uuid:code>/members/", views.members, name="members"),
    path("<uuid:code>/members/role/", views.change_role, name="change_role"),
    path("<uuid:code>/api-keys/", views.api_keys, name="api_keys"),
    path("<uuid:code>/api-keys/<uuid:key>/revoke/", views.revoke_api_key, name="revoke_api_key"),
    path("<uuid:code>/audit/", views.audit_log, name="audit"),
    path("<uuid:code>/invitations/<uuid:invitation>/revoke/", views.revoke_invitation, name="revoke_invitation"),
    path("<uuid:code>/webhooks/", views.webhooks, name="webhooks"),
    path("<uuid:code>/webhooks/<uuid:webhook>/active/", views.webhook_active, name="webhook_active"),
    path("<uuid:code>/webhooks/<uuid:webhook>/delete/", views.webhook_delete, name="webhook_delete"),
    path("<uuid:code>/webhooks/<uuid:webhook>/test/", views.webhook_test, name="webhook_test"),
]
