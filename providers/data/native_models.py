"""Model ids suggested for arms that call a provider directly (not through OpenRouter).

Suggestions only: an arm may name any model its provider serves. Kept short and current;
these ids are the providers' own (Anthropic's use hyphens where OpenRouter's use dots).
"""

from __future__ import annotations

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

NATIVE_MODELS: dict[str, tuple[str, ...]] = {
    "openai": OPENAI_MODELS,
    "anthropic": (
        "claude-opus-4-5",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "claude-opus-4-1",
    ),
    # An Azure arm names a deployment; teams usually name theirs after the model it serves.
    "azure_openai": OPENAI_MODELS,
}
