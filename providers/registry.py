"""Every provider PRBench can call, in one list. A provider is a folder under
``providers/adapters/`` declaring a ``ProviderSpec`` (providers/adapters/spec.py); adding one
means adding its folder and a line to ``PROVIDERS``. Everything else that lists providers (the
model fields' choices, the settings page, the arm form, credential checks, the LiteLLM import,
the form's model suggestions) reads it from here."""

from __future__ import annotations

import json
from functools import lru_cache

from django.utils.module_loading import import_string

from providers.adapters import anthropic, http_agent, mock, openai, replay
from providers.adapters.base import Adapter
from providers.adapters.spec import ProviderSpec

# In the order the settings page offers them.
PROVIDERS: tuple[ProviderSpec, ...] = (
    openai.OPENAI,
    anthropic.ANTHROPIC,
    openai.AZURE_OPENAI,
    openai.OPENROUTER,
    openai.OPENAI_COMPATIBLE,
    http_agent.HTTP_AGENT,
    mock.MOCK,
    replay.REPLAY,
)

ADAPTERS = {spec.name: spec.adapter for spec in PROVIDERS}


def spec_of(provider: str) -> ProviderSpec:
    return next(spec for spec in PROVIDERS if spec.name == provider)


def provider_choices() -> list[tuple[str, str]]:
    """The providers a credential, an allowlist entry or a price row may name, with their labels.
    The model fields' ``choices``: a callable, so a new provider needs no migration."""
    return [(spec.name, spec.label) for spec in PROVIDERS if spec.offered]


def offered_providers() -> list[str]:
    return [name for name, _ in provider_choices()]


def suggested_models() -> dict[str, tuple[str, ...]]:
    """Each provider's suggested model ids, for the providers that declare any."""
    return {spec.name: spec.suggested_models for spec in PROVIDERS if spec.suggested_models}


def litellm_providers() -> dict[str, str]:
    """LiteLLM's provider names -> ours, for the providers LiteLLM's price file prices."""
    return {spec.litellm_provider: spec.name for spec in PROVIDERS if spec.litellm_provider}


def provider_names() -> list[str]:
    return sorted(ADAPTERS)


def adapter_class(provider: str) -> type[Adapter]:
    return import_string(ADAPTERS[provider])


@lru_cache(maxsize=1)
def test_models() -> dict[str, str]:
    """Each provider's "Test connection" model, declared by its adapter (``test_model``).
    Read on first use, not at import: it imports every adapter, and with them the SDKs."""
    return {provider: adapter_class(provider).test_model for provider in provider_names()}


def arm_errors(provider: str, model_name: str, config: object) -> list[str]:
    """Everything wrong with an arm's provider, model and config, each naming its field."""
    if provider not in ADAPTERS:
        return [f"provider {provider!r} is not supported (choose from {', '.join(provider_names())})"]
    if not model_name or not str(model_name).strip():
        return ["model_name must not be empty"]
    if not isinstance(config, dict):
        return ["config must be an object"]
    try:
        json.dumps(config, allow_nan=False)
    except (TypeError, ValueError):
        return ["config must hold only JSON values (strings, numbers, booleans, lists, objects; no NaN)"]
    return adapter_class(provider).config_errors(model_name, config)
