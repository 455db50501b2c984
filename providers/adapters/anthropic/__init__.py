"""Anthropic's Messages API (``adapter.py``)."""

from __future__ import annotations

from providers.adapters.spec import ProviderSpec

ANTHROPIC = ProviderSpec(
    name="anthropic",
    label="Anthropic",
    adapter="providers.adapters.anthropic.adapter.AnthropicAdapter",
    litellm_provider="anthropic",
    # Anthropic's own ids use hyphens where OpenRouter's use dots.
    suggested_models=("claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"),
)
