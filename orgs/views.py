from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from orgs.access import SESSION_KEY, access_org
from orgs.actions import check_add_member, do_set_membership
from orgs.models import Role


@login_required
@require_POST
def switch_org(request: HttpRequest, code: str) -> HttpResponse:
    membership = access_org(request, code)
    request.session[SESSION_KEY] = str(membership.org.code)
    return redirect("experiments:list")


@login_required
def members(request: HttpRequest, code: str) -> HttpResponse:
    membership = access_org(request, code)
    org = membership.org
    error = None
    if request.method == "POST":
        actor = access_org(request, code, manage=True)
        email, role = request.POST.get("email", "").strip(), request.POST.get("role", "")
        try:
            user = check_add_member(org, email, role, actor)
        except ValidationError as exc:
            error = "; ".join(exc.messages)
        else:
            do_set_membership(org, user, role)
            messages.success(request, f"{email} is now {role} of {org.name}")
            return redirect("orgs:members", code=org.code)
    return render(
        request,
        "orgs/members.html",
        {
            "org": org,
            "membership": membership,
            "members": org.memberships.select_related("user").order_by("user__email"),
            "roles": Role.choices,
            "error": error,
        },
    )
