"""Pure string helpers for POSIX-style paths (no filesystem access)."""

from __future__ import annotations

__all__ = ["basename", "split_ext", "with_suffix", "normalize"]


def basename(path: str) -> str:
    """Return the final component of ``path`` (``""`` if it ends with ``/``)."""
    return path.rsplit("/", 1)[-1]


def split_ext(path: str) -> tuple[str, str]:
    """Split ``path`` into ``(root, ext)`` so that ``root + ext == path``.

    ``ext`` is empty or starts with a dot. Behaves like
    :func:`os.path.splitext` for POSIX paths, e.g.
    ``split_ext("dir/archive.tar.gz") == ("dir/archive.tar", ".gz")``.
    """
    name = basename(path)
    dot = name.rfind(".")
    if dot == -1:
        return path, ""
    cut = len(path) - len(name) + dot
    return path[:cut], path[cut:]


def with_suffix(path: str, suffix: str) -> str:
    """Return ``path`` with its extension replaced by ``suffix`` (e.g. ``".md"``)."""
    if suffix and not suffix.startswith("."):
        raise ValueError(f"invalid suffix: {suffix!r}")
    root, _ = split_ext(path)
    return root + suffix


def normalize(path: str) -> str:
    """Collapse duplicate slashes and resolve ``.`` and ``..`` segments."""
    absolute = path.startswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append(part)
            continue
        parts.append(part)
    result = "/".join(parts)
    if absolute:
        return "/" + result
    return result or "."
