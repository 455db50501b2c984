"""Per-arm connect / read / total timeouts, shared by every HTTP adapter."""

from __future__ import annotations

from typing import Any

DEFAULT_CONNECT_S = 10.0
DEFAULT_READ_S = 120.0


def timeout_key(config: dict) -> tuple[float, float]:
    return float(config.get("timeout_connect_s", DEFAULT_CONNECT_S)), float(
        config.get("timeout_read_s", DEFAULT_READ_S)
    )


def timeouts_from_key(key: tuple[float, float]) -> Any:
    # The SDKs bundle their own httpx fork; its Timeout accepts the same arguments.
    import httpx2

    connect, read = key
    return httpx2.Timeout(read, connect=connect)


def try_timeout(config: dict, seconds_left: float | None) -> Any:
    """This try's timeouts: the arm's connect and read timeouts, neither longer than what is
    left of the call's total (``timeout_total_s``, else its retry deadline). The total is
    checked at every socket read, so a server that goes quiet is cut off on time; one that
    keeps trickling bytes is cut off at the first read after the total has run out."""
    connect, read = timeout_key(config)
    if seconds_left is not None:
        connect, read = min(connect, seconds_left), min(read, seconds_left)
    return timeouts_from_key((connect, read))
