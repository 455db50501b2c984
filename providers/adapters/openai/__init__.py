"""The OpenAI chat completions family: OpenAI itself, Azure OpenAI, OpenRouter and any
OpenAI-compatible server (vLLM, Ollama, llama.cpp). One folder because they are one adapter
(``adapter.py``) and its subclasses: the same SDK, request body, stream reader and usage,
each subclass changing only what its service does differently."""

from __future__ import annotations

from providers.adapters.spec import ProviderSpec

# The providers' own ids, short and current; an arm may name any model its provider serves.
OPENAI_MODELS = (
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-4.1",
    "gpt-4.1-mini",
    "o3",
    "o4-mini",
    "gpt-4o",
    "gpt-4o-mini",
)

OPENAI = ProviderSpec(
    name="openai",
    label="OpenAI",
    adapter="providers.adapters.openai.adapter.OpenAIChatAdapter",
    litellm_provider="openai",
    suggested_models=OPENAI_MODELS,
)
AZURE_OPENAI = ProviderSpec(
    name="azure_openai",
    label="Azure OpenAI",
    adapter="providers.adapters.openai.adapter.AzureOpenAIAdapter",
    endpoint_fields=("base_url", "api_version"),
    endpoint_missing="Azure OpenAI needs an endpoint (base_url) and an api_version",
    litellm_provider="azure",
    # An Azure arm names a deployment; teams usually name theirs after the model it serves.
    suggested_models=OPENAI_MODELS,
)
# Its model ids are suggested from its own model list (providers/catalog.py), which also
# prices a model no catalog row does.
OPENROUTER = ProviderSpec(
    name="openrouter",
    label="OpenRouter",
    adapter="providers.adapters.openai.adapter.OpenRouterAdapter",
    litellm_provider="openrouter",
)
OPENAI_COMPATIBLE = ProviderSpec(
    name="openai_compatible",
    label="OpenAI-compatible (self-hosted)",
    adapter="providers.adapters.openai.adapter.OpenAICompatibleAdapter",
    key_required=False,  # a local server may need no key
    endpoint_fields=("base_url",),
    endpoint_missing="an OpenAI-compatible server needs its base_url",
)
