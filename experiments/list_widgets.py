"""The attempts list's filter widgets, drawn in Python.

The filter form sits above every attempts page, and Django draws each of its widgets through
templates: a select of 23 error categories is 23 option templates, each including the attrs
template. That took a tenth of a run page (issue 31). These widgets write the HTML Django's
own templates (django/forms/widgets/select.html, select_option.html, input.html, attrs.html)
write, byte for byte, as the renderer returns it (stripped); a guard test
(tests/experiments/test_attempt_list_form.py) holds them to the templates' output. A widget
given another template draws through it, as Django would.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms import Select
from django.utils.html import conditional_escape
from django.utils.safestring import SafeData, SafeString, mark_safe


class ListSelect(forms.Select):
    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        if (self.template_name, self.option_template_name) != (Select.template_name, Select.option_template_name):
            return super().render(name, value, attrs, renderer)
        widget = self.get_context(name, value, attrs)["widget"]
        return mark_safe(
            f'<select name="{_text(widget["name"])}"{_attrs(widget["attrs"])}>{_groups(widget)}\n</select>'
        )


class ListTextInput(forms.TextInput):
    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        if self.template_name != forms.TextInput.template_name:
            return super().render(name, value, attrs, renderer)
        widget = self.get_context(name, value, attrs)["widget"]
        shown = "" if widget["value"] is None else f' value="{_formatted(widget["value"])}"'
        return mark_safe(
            f'<input type="{_text(widget["type"])}" name="{_text(widget["name"])}"{shown}{_attrs(widget["attrs"])}>'
        )


def _groups(widget: dict[str, Any]) -> str:
    drawn = []
    for group_name, options, _ in widget["optgroups"]:
        if group_name:
            drawn.append(f'\n  <optgroup label="{_text(group_name)}">')
        drawn += (
            f'\n  <option value="{_formatted(o["value"])}"{_attrs(o["attrs"])}>{_text(o["label"])}</option>\n'
            for o in options
        )
        if group_name:
            drawn.append("\n  </optgroup>")
    return "".join(drawn)


def _attrs(attrs: dict[str, Any]) -> str:
    """As attrs.html: a True attribute by its name alone, a False one left out."""
    return "".join(
        f" {_text(name)}" if value is True else f' {_text(name)}="{_formatted(value)}"'
        for name, value in attrs.items()
        if value is not False
    )


def _formatted(value: Any) -> str:
    """``{{ value|stringformat:'s' }}``: the value as text, escaped unless it was safe."""
    return str(value) if isinstance(value, SafeData) else conditional_escape(str(value))


def _text(value: Any) -> str:
    """``{{ value }}`` of a text (a name, a label)."""
    return conditional_escape(value)
