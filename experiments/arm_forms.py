"""The experiment form's arms: one row per arm, each drawn for its provider.

A row asks for the label, the provider, the model (suggested from the catalog), one of the
organisation's credentials of that provider, and every setting the provider's adapter
declares (providers/adapters/config.py), each as the input its kind calls for. A row only
reads the inputs (a number's text as a JSON number, a ticked box as true); whether a value
is allowed is the declaration's to say, through ``experiment_arm_problems``, the one check
specs, the API and the commands use too. The raw JSON stays as an advanced field: its keys
merge with the typed ones, and a key given differently in both is refused.

A row says which provider its settings were drawn for (``settings_for``, a hidden input).
When the provider changed since (a browser without JavaScript), the page is shown again with
the new provider's settings instead of being saved; with htmx the row is redrawn in place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, cast

from django import forms
from django.forms.fields import InvalidJSONInput
from django.http import QueryDict

from experiments.replay import experiment_arm_problems
from orgs.models import Organization
from prbench.inputs import (
    ARM_CONFIG_MAX_BYTES,
    LABEL_MAX,
    NAME_MAX,
    JsonRejected,
    TextValidator,
    document_problems,
    parse_json,
)
from providers.adapters.config import COMMON_KEYS, HTTP_KEYS, OPERATIONAL_KEYS, Setting, label_of
from providers.catalog import ALL_SUGGESTIONS_ID, suggestion_list_id
from providers.models import ProviderCredential
from providers.policy import arm_credential_problems
from providers.registry import ADAPTERS, adapter_class, provider_names

PREFIX = "arms"
SETTING = "set_"  # a setting's field name: "set_temperature" (arms-0-set_temperature)
# The row a new experiment starts with, and the one "Add an arm" brings.
FRESH_ARM: dict[str, Any] = {"provider": "mock", "config": {}}
NUMBER_TEXT_MAX = 40
INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
DECIMAL_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
# A problem the check names a config key in: "config.temperature must be ..."
PROBLEM_KEY = re.compile(r"config\.([A-Za-z0-9_]+)\b")


class ConfigField(forms.JSONField):
    """JSON within the input limits: bounded size and nesting (Python's parser recurses per
    level), no NaN, no NUL (Postgres refuses both in ``jsonb``)."""

    def to_python(self, value):
        if self.disabled or not isinstance(value, str) or value in self.empty_values:
            return super().to_python(value)
        if len(value.encode()) > ARM_CONFIG_MAX_BYTES:
            raise forms.ValidationError(f"The config is larger than {ARM_CONFIG_MAX_BYTES:,} bytes.")
        try:
            parsed = parse_json(value)
        except JsonRejected as exc:
            raise forms.ValidationError(f"{self.error_messages['invalid']} ({exc})") from None
        problems = document_problems(parsed, "config")
        if problems:
            raise forms.ValidationError(problems)
        return parsed

    def bound_data(self, data, initial):
        # Re-showing the form parses the input again: the same limits apply there, and
        # refused input is shown back as typed (a lone surrogate could not even be rendered).
        if self.disabled or not isinstance(data, str):
            return super().bound_data(data, initial)
        try:
            if len(data.encode()) > ARM_CONFIG_MAX_BYTES:
                return InvalidJSONInput(data)
            parsed = parse_json(data)
        except JsonRejected:
            return InvalidJSONInput(data)
        return InvalidJSONInput(data) if document_problems(parsed) else parsed


# --- a declared setting as a form field ---------------------------------------------------


class NumberSettingField(forms.Field):
    """A number input whose text becomes the JSON number it spells (an int when it has no
    fraction, so 200 stays 200); other text is passed on as typed for the setting to refuse."""

    def __init__(self, setting: Setting, **kwargs):
        attrs = {"step": "1" if setting.kind == "integer" else "any"}
        low, high = getattr(setting, "low", 0 if setting.kind == "seconds" else None), getattr(setting, "high", None)
        attrs |= {name: _number_attr(bound) for name, bound in (("min", low), ("max", high)) if bound is not None}
        super().__init__(widget=forms.NumberInput(attrs=attrs), **kwargs)

    def to_python(self, value: Any) -> int | float | str | None:
        text = "" if value is None else str(value).strip()
        if not text:
            return None
        if len(text) > NUMBER_TEXT_MAX:
            raise forms.ValidationError(f"A number of at most {NUMBER_TEXT_MAX} characters, please.")
        if INTEGER_TEXT.fullmatch(text):
            return int(text)
        return float(text) if DECIMAL_TEXT.fullmatch(text) and _finite(float(text)) else text


class ChoiceSettingField(forms.CharField):
    """A select of the declared values; whatever comes back is the setting's to judge."""

    def __init__(self, setting: Setting, **kwargs):
        choices = [("", "not set"), *((value, value) for value in getattr(setting, "values", ()))]
        super().__init__(max_length=NAME_MAX, widget=forms.Select(choices=choices), **kwargs)

    def to_python(self, value: Any) -> str | None:
        return super().to_python(value) or None


def setting_field(name: str, setting: Setting) -> forms.Field | None:
    """The input a declared setting is asked with; None for one only JSON can say (an object)."""
    words = setting.values_in_words()
    hint = ". ".join(part for part in (setting.help, words[:1].upper() + words[1:]) if part)
    common: dict[str, Any] = {"required": False, "label": label_of(name, setting), "help_text": hint}
    if setting.kind in ("number", "integer", "seconds"):
        return NumberSettingField(setting, **common)
    if setting.kind == "choice":
        return ChoiceSettingField(setting, **common)
    if setting.kind == "boolean":
        return forms.BooleanField(initial=getattr(setting, "default", False), **common)
    return None


def shows_exactly(setting: Setting, value: Any) -> bool:
    """Whether the setting's input can hold ``value`` as it is, so a row saved again gives it
    back unchanged; anything else (an object, an unlisted choice, a boolean equal to its
    default, which an input cannot tell from "not set") stays in the advanced JSON."""
    if setting.kind in ("number", "seconds"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if setting.kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if setting.kind == "choice":
        return isinstance(value, str) and value in getattr(setting, "values", ())
    if setting.kind == "boolean":
        return isinstance(value, bool) and value != getattr(setting, "default", None)
    return False


def declared_settings(provider: str) -> dict[str, Setting]:
    """The provider's settings, its own first, then the sampling ones, then how calls are made."""
    if provider not in ADAPTERS:
        return {}
    declared = adapter_class(provider).config_keys
    shared = COMMON_KEYS.keys() | HTTP_KEYS.keys()
    order = sorted(declared, key=lambda name: (name in OPERATIONAL_KEYS, name in shared))
    return {name: declared[name] for name in order}


def _number_attr(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def _finite(value: float) -> bool:
    return value not in (float("inf"), float("-inf")) and value == value


def _same_value(a: Any, b: Any) -> bool:
    # true and 1 are equal in Python, not in a config.
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# --- one arm ----------------------------------------------------------------------------


class ArmForm(forms.Form):
    label = forms.CharField(max_length=LABEL_MAX, validators=[TextValidator(LABEL_MAX)])
    provider = forms.ChoiceField(choices=[])
    # The browser offers ids from the model catalog: the <datalist> of the row's provider.
    model_name = forms.CharField(
        label="Model",
        max_length=NAME_MAX,
        validators=[TextValidator(NAME_MAX)],
        widget=forms.TextInput(attrs={"list": ALL_SUGGESTIONS_ID}),
    )
    # A credential by name, never a URL: where the requests go is the credential's. Any
    # name comes through; the one check says whether the provider has it.
    credential = forms.CharField(max_length=NAME_MAX, required=False, widget=forms.Select)
    config = ConfigField(
        required=False,
        initial=dict,
        label="Settings as JSON",
        widget=forms.Textarea(attrs={"rows": 3, "class": "config-json"}),
        help_text="Keys here merge with the fields above; a key given in both must have the same value",
    )

    def __init__(self, *args, org: Organization, credentials: dict[str, list[str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.org = org
        self.switched_from = ""  # set on a row shown again with another provider's settings
        cast(forms.ChoiceField, self.fields["provider"]).choices = [(n, n) for n in provider_names()]
        self.provider_name = str(self["provider"].value() or "")
        # Which provider the submitted settings inputs were drawn for; None when a script
        # posted the row without them (its settings are then the JSON alone, as before).
        self.settings_for: str | None = self.data.get(self.add_prefix("settings_for")) if self.is_bound else None
        self.settings = declared_settings(self.provider_name)
        self.uses_credential = self.provider_name in ADAPTERS and adapter_class(self.provider_name).uses_credential
        names = (credentials if credentials is not None else org_credentials(org)).get(self.provider_name, [])
        first = "the provider's only credential" if names else "none set up yet (see Providers)"
        cast(forms.Select, self.fields["credential"].widget).choices = [("", first), *((n, n) for n in names)]
        self.fields["model_name"].widget.attrs["list"] = suggestion_list_id(self.provider_name)
        for name, setting in self.settings.items():
            field = setting_field(name, setting)
            if field is not None:
                self.fields[SETTING + name] = field

    @property
    def index(self) -> int:
        return int(str(self.prefix).rsplit("-", 1)[-1])

    @property
    def switched(self) -> bool:
        """The provider changed after this row's settings inputs were drawn."""
        return self.is_bound and self.settings_for is not None and self.settings_for != self.provider_name

    def setting_fields(self, operational: bool) -> list[forms.BoundField]:
        return [
            self[SETTING + name]
            for name in self.settings
            if SETTING + name in self.fields and (name in OPERATIONAL_KEYS) == operational
        ]

    def answer_settings(self) -> list[forms.BoundField]:
        return self.setting_fields(operational=False)

    def call_settings(self) -> list[forms.BoundField]:
        return self.setting_fields(operational=True)

    def call_settings_changed(self) -> bool:
        """Whether the folded-away call settings hold anything to see (a value or an error)."""
        for bound in self.call_settings():
            value = bound.value()
            default = bound.field.initial if isinstance(bound.field, forms.BooleanField) else None
            if bound.errors or (value not in (None, "") and value != default):
                return True
        return False

    def advanced_given(self) -> bool:
        return bool(self["config"].errors) or self["config"].value() not in (None, "", "{}")

    def json_only_settings(self) -> list[tuple[str, Setting]]:
        return [(name, s) for name, s in self.settings.items() if SETTING + name not in self.fields]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        label = data["label"]
        given = self._given_settings(data)
        advanced = data.get("config")
        advanced = {} if advanced in (None, "") else advanced
        config: Any = advanced
        if isinstance(advanced, dict):
            for name in given.keys() & advanced.keys():
                if not _same_value(given[name], advanced[name]):
                    self.add_error(
                        SETTING + name,
                        f"Arm {label!r}: config.{name} is {_shown(given[name])} here but {_shown(advanced[name])} "
                        "in the advanced JSON: give it in one place",
                    )
            if self.errors:
                return data
            merged = advanced | given
            # In the order the form asks for them, wherever each was given: the JSON the
            # experiment page shows reads like the form.
            order = {name: i for i, name in enumerate(self.settings)}
            config = {name: merged[name] for name in sorted(merged, key=lambda name: order.get(name, len(order)))}
        data["config"] = config
        problems = experiment_arm_problems(self.org.pk, data["provider"], data["model_name"], config)
        data["credential"], credential_problems = arm_credential_problems(
            self.org.pk, data["provider"], data.get("credential") or ""
        )
        for problem in problems + credential_problems:
            self.add_error(self._field_of(problem, given), f"Arm {label!r}: {problem}")
        return data

    def _given_settings(self, data: dict) -> dict[str, Any]:
        """The settings the typed inputs give. A box is only read when the row's inputs were
        drawn for its provider (an unticked box is not sent at all), and only says something
        when it differs from what the adapter does anyway."""
        drawn_here = self.settings_for == self.provider_name
        given = {}
        for name, setting in self.settings.items():
            value = data.get(SETTING + name)
            if setting.kind == "boolean":
                if drawn_here and value != getattr(setting, "default", None):
                    given[name] = bool(value)
            elif value is not None:
                given[name] = value
        return given

    def _field_of(self, problem: str, given: dict[str, Any]) -> str | None:
        if problem.startswith("credential") and self.uses_credential:
            return "credential"
        key = PROBLEM_KEY.match(problem)
        if key is None:
            return None
        return SETTING + key[1] if key[1] in given else "config"

    def shown_again(self) -> dict[str, Any]:
        """This row's inputs as typed, as the initial values of a row drawn again (rows added
        or removed, or the provider changed): nothing is checked, so nothing is flagged yet.
        Settings the provider shares with the one the inputs were drawn for keep their value."""
        drawn_for = declared_settings(self.settings_for) if self.settings_for is not None else None
        initial: dict[str, Any] = {}
        for name, field in self.fields.items():
            value = field.widget.value_from_datadict(self.data, self.files, self.add_prefix(name))
            if name.startswith(SETTING):
                key = name.removeprefix(SETTING)
                kept = (drawn_for is not None and key in drawn_for) or (
                    drawn_for is None and self.settings[key].kind != "boolean" and value is not None
                )
                if not kept:
                    continue
            initial[name] = InvalidJSONInput(value or "") if name == "config" else value
        return initial


def arm_initial(arm: Any) -> dict[str, Any]:
    """A saved arm as a row: each setting in its input when the input can hold it exactly,
    the rest (objects, undeclared or ill-typed keys from older rows) in the advanced JSON."""
    settings = declared_settings(arm.provider)
    typed, rest = {}, {}
    for name, value in arm.config.items():
        setting = settings.get(name)
        if setting is not None and setting.kind != "object" and shows_exactly(setting, value):
            typed[SETTING + name] = value
        else:
            rest[name] = value
    return {
        "label": arm.label,
        "provider": arm.provider,
        "model_name": arm.model_name,
        "credential": arm.credential_name,
        "config": rest,
        **typed,
    }


def org_credentials(org: Organization) -> dict[str, list[str]]:
    """The organisation's credential names by provider: a row offers its provider's."""
    names: dict[str, list[str]] = {}
    for provider, name in ProviderCredential.objects.filter(org=org).order_by("name").values_list("provider", "name"):
        names.setdefault(provider, []).append(name)
    return names


# --- the rows together -------------------------------------------------------------------


class BaseArmFormSet(forms.BaseFormSet):
    def clean(self) -> None:
        if any(self.errors):
            return
        labels = [f.cleaned_data["label"] for f in self.kept_forms()]
        if not labels:
            raise forms.ValidationError("An experiment needs at least one arm.")
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise forms.ValidationError(f"Arm labels must be unique: {', '.join(duplicates)}")

    def kept_forms(self) -> list[ArmForm]:
        return [f for f in self.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]


# No spare row: "Add an arm" brings one. DELETE is still read, for scripts that post it.
ArmFormSet = forms.formset_factory(ArmForm, formset=BaseArmFormSet, extra=0, can_delete=True)


def arm_formset(org: Organization, data: QueryDict | None = None, initial: list[dict] | None = None) -> BaseArmFormSet:
    kwargs = {"org": org, "credentials": org_credentials(org)}
    return cast(BaseArmFormSet, ArmFormSet(data, prefix=PREFIX, initial=initial, form_kwargs=kwargs))


def fresh_arm_form(org: Organization, index: int) -> ArmForm:
    return ArmForm(prefix=f"{PREFIX}-{index}", org=org, initial=dict(FRESH_ARM))


@dataclass(frozen=True)
class RowsChange:
    """A submit that asks to redraw the rows rather than save: add one, remove one, or show
    the settings of a row whose provider changed (``row``: that row's index, when known)."""

    action: str  # "add", "remove" or "show"
    row: int | None = None


def rows_change(data: QueryDict, arms: BaseArmFormSet) -> RowsChange | None:
    """What the submit asks of the rows; None for a save."""
    if "add_arm" in data:
        return RowsChange("add")
    if "remove_arm" in data:
        return RowsChange("remove", _row_index(data.get("remove_arm"), arms))
    if "show_settings" in data:
        return RowsChange("show", _row_index(data.get("show_settings"), arms))
    if any(cast(ArmForm, form).switched for form in arms.forms):
        return RowsChange("show")
    return None


def _row_index(value: object, arms: BaseArmFormSet) -> int | None:
    try:
        index = int(str(value))
    except ValueError:
        return None
    return index if 0 <= index < len(arms.forms) else None


def rows_redrawn(org: Organization, arms: BaseArmFormSet, change: RowsChange) -> BaseArmFormSet:
    """The rows as typed, with one more, one fewer, or changed providers' settings drawn."""
    rows = [cast(ArmForm, form).shown_again() for form in arms.forms]
    switched = {i: cast(ArmForm, form).settings_for for i, form in enumerate(arms.forms) if form.switched}
    if change.action == "add":
        rows.append(dict(FRESH_ARM))
    elif change.action == "remove" and change.row is not None:
        del rows[change.row]
        switched = {i - (i > change.row): old for i, old in switched.items() if i != change.row}
    redrawn = arm_formset(org, initial=rows)
    for i, old in switched.items():
        cast(ArmForm, redrawn.forms[i]).switched_from = old or ""
    return redrawn
