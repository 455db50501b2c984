"""What a provider declares about itself, in its own folder (``providers/adapters/<name>/``).

Everything PRBench lists per provider - the model field choices, the settings page, the arm
form, which credential fields it needs, its rows in LiteLLM's price file, the model ids the
form suggests - is read from these declarations (``providers.registry``), so adding a provider
touches its folder and the registry's one list. A spec names its adapter by dotted path: the
adapter module imports the provider's SDK, which nothing should pay for just to list names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderSpec:
    name: str  # what arms, credentials, allowlist entries and price rows call it
    label: str  # what the settings page shows
    adapter: str  # dotted path of its Adapter class, imported on first use
    # Offered on the settings page, the allowlist and the price catalog. False for a provider
    # that is never called (a replay): it has no credential, and no allowlist governs it.
    offered: bool = True
    key_required: bool = True  # a new credential must carry an API key
    # The credential fields it cannot be called without, and what saving one without them says.
    endpoint_fields: tuple[str, ...] = ()
    endpoint_missing: str = ""
    # Its ``litellm_provider`` in LiteLLM's price file, whose ids it prefixes with "<that>/";
    # empty: LiteLLM does not price it.
    litellm_provider: str = ""
    # Model ids the arm form suggests (suggestions only: an arm may name any model it serves).
    suggested_models: tuple[str, ...] = ()
