"""A guard: the attempts list's filter widgets, drawn in Python (experiments/list_widgets.py) to
keep the run page fast (issue 31), write what Django's widget templates write, byte for byte:
empty, filled in, refused, with text that needs escaping, and with option groups and flags."""

from __future__ import annotations

import copy

import pytest
from django import forms
from django.http import QueryDict

from experiments.forms import AttemptListForm
from experiments.list_widgets import ListSelect, ListTextInput
from tests.factories import run_in_every_state

QUERIES = [
    "",
    "arm=oracle&status=completed&outcome=model_success&result=wrong&sort=-latency",
    "error=timeout&task=01-slugify&question=%3Cb%3E%26%22%27&answer=x%3Cy&sort=cost",
    "sort=bogus&arm=nobody&status=nothing&task=" + "x" * 201,  # refused: the widgets say aria-invalid
]


def by_django(bound: forms.BoundField) -> str:
    """The field drawn by Django's own widget class (the one ours extends), through its templates."""
    widget = copy.copy(bound.field.widget)
    widget.__class__ = forms.Select if isinstance(widget, ListSelect) else forms.TextInput
    return bound.as_widget(widget)


@pytest.mark.parametrize("query", QUERIES)
def test_the_filter_form_draws_as_djangos_templates_draw_it(org, dataset, alice, query):
    run = run_in_every_state(org, dataset, alice, repetitions=1)
    form = AttemptListForm(QueryDict(query), run)
    form.is_valid()

    shown = [bound for bound in form if isinstance(bound.field.widget, (ListSelect, ListTextInput))]
    ours, djangos = [str(bound) for bound in shown], [by_django(bound) for bound in shown]

    assert len(shown) == 9  # every field the run page shows
    assert ours == djangos
    assert ('aria-invalid="true"' in "".join(ours)) == (query == QUERIES[-1])


def test_a_select_with_groups_and_flags_draws_as_djangos():
    choices = [("", "none"), ("Fruit <&>", [("a", "apple"), ("b", 'b"anana')]), (3, "three")]
    attrs = {"required": True, "disabled": False, "data-x": '<&">', "id": "id_pick"}

    ours = ListSelect(attrs=attrs, choices=choices).render("pick", "b")
    djangos = forms.Select(attrs=attrs, choices=choices).render("pick", "b")

    assert ours == djangos and "<optgroup" in ours and " required" in ours and "disabled" not in ours


def test_a_text_input_with_a_value_draws_as_djangos():
    attrs = {"maxlength": 200, "autofocus": True}
    assert ListTextInput(attrs).render("q", '<b>"&') == forms.TextInput(attrs).render("q", '<b>"&')
