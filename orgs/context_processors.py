from django.http import HttpRequest

from orgs.access import current_membership, memberships_of_request


def current_org(request: HttpRequest) -> dict:
    if not request.user.is_authenticated:
        return {}
    return {
        "current_membership": current_membership(request),
        "all_memberships": memberships_of_request(request),
    }
