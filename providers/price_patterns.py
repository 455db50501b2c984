"""Which catalog row's ``model_pattern`` prices a model id. Below both the Price model (whose
``matches`` asks it) and ``providers.pricing`` (which picks the row in force), so neither has
to import the other to use it."""

from __future__ import annotations

import fnmatch
import re

# A dated snapshot id is its family's id plus a release date: OpenAI writes
# ``gpt-4.1-2025-04-14``, Anthropic ``claude-opus-4-5-20251101``.
SNAPSHOT_DATE = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")

EXACT, SNAPSHOT, GLOB = 3, 2, 1


def match_rank(pattern: str, model_name: str) -> tuple[int, int] | None:
    """How well a catalog row's pattern fits a model id, or None when it does not.

    The one place that decides which row prices a model: the exact id first, then the family
    of a dated snapshot (``gpt-4.1-2025-04-14`` -> ``gpt-4.1``), then a glob, the one with the
    longest fixed text winning. A glob never beats an explicit row, so ``o4-mini*`` cannot
    price ``o4-mini-deep-research`` once that model has a row of its own.
    """
    if not any(c in pattern for c in "*?["):
        if pattern == model_name:
            return (EXACT, len(pattern))
        family = SNAPSHOT_DATE.sub("", model_name)
        if family != model_name and family == pattern:
            return (SNAPSHOT, len(pattern))
        return None
    if fnmatch.fnmatchcase(model_name, pattern):
        return (GLOB, len(pattern.replace("*", "").replace("?", "")))
    return None
