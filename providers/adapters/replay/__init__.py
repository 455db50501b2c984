"""Another system's recorded answers, replayed as an arm (``adapter.py``)."""

from __future__ import annotations

from providers.adapters.spec import ProviderSpec

REPLAY = ProviderSpec(
    name="replay",
    label="Replay",
    adapter="providers.adapters.replay.adapter.ReplayAdapter",
    offered=False,  # it sends nothing anywhere: no credential, no allowlist entry, no price row
)
