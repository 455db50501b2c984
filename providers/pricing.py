from decimal import Decimal

from providers.types import Usage

PER_MILLION = Decimal(1_000_000)


def cost_for(usage: Usage, price_input_per_mtok: Decimal, price_output_per_mtok: Decimal) -> Decimal:
    cost = usage.input_tokens * price_input_per_mtok + usage.output_tokens * price_output_per_mtok
    return (cost / PER_MILLION).quantize(Decimal("0.00000001"))
