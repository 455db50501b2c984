"""The mock provider (``adapter.py``) and the books of right answers it reads (``mock_book.py``)."""

from __future__ import annotations

from providers.adapters.spec import ProviderSpec

MOCK = ProviderSpec(
    name="mock",
    label="Mock",
    adapter="providers.adapters.mock.adapter.MockAdapter",
    key_required=False,  # it never looks a credential up
)
