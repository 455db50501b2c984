"""URL slug generation helpers."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["slugify"]

_NON_WORD = re.compile(r"[^a-z0-9]+")


def slugify(text: str, separator: str = "-", max_length: int | None = None) -> str:
    """Convert ``text`` into a URL-friendly slug.

    Accented characters are transliterated to their closest ASCII
    equivalent, everything is lower-cased and every run of characters that
    are not ASCII letters or digits is collapsed into a single ``separator``.

    If ``max_length`` is given, the slug is truncated to at most that many
    characters. The result never starts or ends with ``separator``.

    >>> slugify("Héllo, Wörld!")
    'hello-world'
    """
    if max_length is not None and max_length < 1:
        raise ValueError("max_length must be a positive integer")
    normalized = unicodedata.normalize("NFKD", text)
    ascii_text = normalized.encode("ascii", "ignore").decode("ascii")
    slug = _NON_WORD.sub(separator, ascii_text.lower())
    slug = slug.strip(separator)
    if max_length is not None:
        slug = slug[:max_length]
    return slug
