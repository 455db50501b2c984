"""A tiny shopping-cart model used by the checkout service."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

__all__ = ["LineItem", "Cart"]


@dataclass(frozen=True)
class LineItem:
    """A quantity of one product (identified by ``sku``) at a fixed unit price."""

    sku: str
    unit_price: Decimal
    quantity: int = 1

    @property
    def subtotal(self) -> Decimal:
        return self.unit_price * self.quantity


class Cart:
    """A customer's cart. Adding a SKU that is already present bumps its quantity."""

    def __init__(self, items: list[LineItem] = []) -> None:
        self.items = items

    def add(self, sku: str, unit_price: Decimal | str, quantity: int = 1) -> None:
        """Add ``quantity`` units of ``sku`` at ``unit_price`` to the cart."""
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        for index, item in enumerate(self.items):
            if item.sku == sku:
                self.items[index] = LineItem(sku, item.unit_price, item.quantity + quantity)
                return
        self.items.append(LineItem(sku, Decimal(str(unit_price)), quantity))

    def remove(self, sku: str) -> None:
        """Remove every unit of ``sku``; raise :class:`KeyError` if it is absent."""
        for index, item in enumerate(self.items):
            if item.sku == sku:
                del self.items[index]
                return
        raise KeyError(sku)

    @property
    def total(self) -> Decimal:
        """Sum of all line-item subtotals."""
        return sum((item.subtotal for item in self.items), Decimal("0"))

    def __len__(self) -> int:
        """Total number of units in the cart."""
        return sum(item.quantity for item in self.items)
