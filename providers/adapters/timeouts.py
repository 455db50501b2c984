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
    left of the call's total (``timeout_total_s``, else its retry deadline), so a read that
    stalls never outlasts the total. A server that keeps trickling bytes never stalls a read;
    streamed answers check the total after every network read as well
    (``streaming.enforce_deadline``), so it is cut off within one read of the total. An
    unstreamed body has no such check: it is cut at the first read after the total."""
    connect, read = timeout_key(config)
    if seconds_left is not None:
        connect, read = min(connect, seconds_left), min(read, seconds_left)
    return timeouts_from_key((connect, read))
