"""A team's own agent service, called over HTTP with the whole task (``adapter.py``)."""

from __future__ import annotations

from providers.adapters.spec import ProviderSpec

HTTP_AGENT = ProviderSpec(
    name="http_agent",
    label="Your own agent (HTTP)",
    adapter="providers.adapters.http_agent.adapter.HttpAgentAdapter",
    # The credential's key is the signing secret: a request that cannot be signed is never sent.
    endpoint_fields=("base_url",),
    endpoint_missing="an agent service needs its endpoint (base_url)",
)
