"""Provider adapters by name. Adding a provider means adding a module and a line here."""

from __future__ import annotations

import json
from functools import lru_cache

from django.utils.module_loading import import_string

from providers.adapters.base import Adapter

ADAPTERS = {
    "mock": "providers.adapters.mock.MockAdapter",
    "openai": "providers.adapters.openai_chat.OpenAIChatAdapter",
    "azure_openai": "providers.adapters.openai_chat.AzureOpenAIAdapter",
    "openrouter": "providers.adapters.openai_chat.OpenRouterAdapter",
    "openai_compatible": "providers.adapters.openai_chat.OpenAICompatibleAdapter",
    "anthropic": "providers.adapters.anthropic_messages.AnthropicAdapter",
    "replay": "providers.adapters.replay.ReplayAdapter",
}


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
