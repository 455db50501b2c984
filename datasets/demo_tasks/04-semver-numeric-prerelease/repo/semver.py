"""Parsing and precedence of Semantic Versioning 2.0.0 version strings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

__all__ = ["Version"]

_SEMVER = re.compile(
    r"^(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


@total_ordering
@dataclass(frozen=True)
class Version:
    """A semantic version. Build metadata is ignored for equality and ordering."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, text: str) -> "Version":
        """Parse ``text`` such as ``"1.2.3-rc.1+build.5"`` into a :class:`Version`."""
        match = _SEMVER.match(text.strip())
        if match is None:
            raise ValueError(f"not a valid semantic version: {text!r}")
        pre, build = match.group("pre"), match.group("build")
        return cls(
            int(match.group("major")),
            int(match.group("minor")),
            int(match.group("patch")),
            tuple(pre.split(".")) if pre else (),
            tuple(build.split(".")) if build else (),
        )

    def _precedence_key(self) -> tuple:
        if not self.prerelease:
            # A normal release has higher precedence than any of its pre-releases.
            return (self.major, self.minor, self.patch, 1, ())
        identifiers = tuple(self.prerelease)
        return (self.major, self.minor, self.patch, 0, identifiers)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._precedence_key() < other._precedence_key()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text
