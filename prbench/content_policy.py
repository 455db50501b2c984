"""The Content-Security-Policy: settings.CONTENT_SECURITY_POLICY on every page, and on
django-rq's admin pages also the exact inline code those pages carry.

django-rq's templates wire the queue pages' bulk actions with an inline <script> and give some
pages an inline <style> or a style attribute; the strict policy refused all of them, so
selecting jobs and applying an action did nothing. Those pages (staff only, under the admin)
get the sha256 hash of each piece, computed from the installed templates: no 'unsafe-inline',
and a script that is not exactly one of django-rq's still does not run. Customer pages, and
the rest of the admin, keep the strict policy untouched.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from pathlib import Path

import django_rq
from csp.middleware import CSPMiddleware, PolicyParts
from django.http import HttpRequest, HttpResponseBase

DJANGO_RQ_TEMPLATES = Path(django_rq.__file__).parent / "templates" / "django_rq"

# A template's inline code is rendered as written only if it holds no template tag; one that
# did would hash differently once rendered (tests/prbench/test_queue_admin_policy.py renders
# the pages and checks every piece against the header).
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.DOTALL)
INLINE_STYLE = re.compile(r"<style\b[^>]*>(.*?)</style>", re.DOTALL)
STYLE_ATTRIBUTE = re.compile(r"""\sstyle=(?:"([^"]*)"|'([^']*)')""")


def source_hash(code: str) -> str:
    digest = hashlib.sha256(code.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def inline_code(html: str) -> dict[str, list[str]]:
    """Each inline script, inline style sheet and style attribute's text in a page or template."""
    return {
        "scripts": INLINE_SCRIPT.findall(html),
        "styles": INLINE_STYLE.findall(html),
        "style attributes": [double or single for double, single in STYLE_ATTRIBUTE.findall(html)],
    }


@functools.cache
def django_rq_allowances() -> dict[str, list[str]]:
    """What django-rq's pages add to the policy: the hash of every piece of inline code in its
    installed templates. A style attribute matches a hash only under 'unsafe-hashes', which
    still allows nothing but the hashed text."""
    scripts: set[str] = set()
    styles: set[str] = set()
    for template in DJANGO_RQ_TEMPLATES.glob("*.html"):
        code = inline_code(template.read_text())
        scripts.update(source_hash(script) for script in code["scripts"])
        styles.update(source_hash(style) for style in code["styles"] + code["style attributes"])
    return {"script-src": sorted(scripts), "style-src": ["'unsafe-hashes'", *sorted(styles)]}


def is_django_rq_page(request: HttpRequest) -> bool:
    # django-rq registers its views in the admin (django_rq/admin.py, QueueAdmin.get_urls), all
    # named django_rq_*; its dashboard is the admin changelist of its Dashboard model.
    match = request.resolver_match
    return match is not None and match.namespace == "admin" and (match.url_name or "").startswith("django_rq_")


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if not report_only and is_django_rq_page(request):
            parts.update = {**django_rq_allowances(), **(parts.update or {})}
        return parts
