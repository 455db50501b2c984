from decimal import Decimal

import pytest

from shopping_cart import Cart, LineItem


def test_new_cart_is_empty():
    cart = Cart()
    assert len(cart) == 0
    assert cart.total == Decimal("0")


def test_add_items_and_total():
    cart = Cart()
    cart.add("SKU-1", "9.99")
    cart.add("SKU-2", Decimal("0.50"), quantity=4)
    assert len(cart) == 5
    assert cart.total == Decimal("11.99")


def test_adding_same_sku_merges_quantity():
    cart = Cart()
    cart.add("SKU-1", "2.00")
    cart.add("SKU-1", "2.00", quantity=2)
    assert cart.items == [LineItem("SKU-1", Decimal("2.00"), 3)]


def test_remove():
    cart = Cart()
    cart.add("SKU-1", "1.00")
    cart.remove("SKU-1")
    assert len(cart) == 0
    with pytest.raises(KeyError):
        cart.remove("SKU-1")


def test_invalid_quantity():
    with pytest.raises(ValueError):
        Cart().add("SKU-1", "1.00", quantity=0)


def test_carts_are_independent():
    first = Cart()
    first.add("SKU-1", "9.99")
    second = Cart()
    assert len(second) == 0
    second.add("SKU-2", "1.00")
    assert [item.sku for item in first.items] == ["SKU-1"]


def test_initial_items():
    cart = Cart([LineItem("SKU-9", Decimal("3.00"), 2)])
    assert cart.total == Decimal("6.00")
