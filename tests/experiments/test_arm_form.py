"""The experiment form's arms (experiments/arm_forms.py, templates/experiments/_arms.html): a
row per arm drawn for its provider, each declared setting a typed input, the raw JSON as an
advanced field; rows added, removed and redrawn with and without htmx."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import Experiment, ModelArm
from providers.adapters.config import Setting, label_of
from providers.registry import adapter_class, provider_names
from tests.conftest import client_for
from tests.factories import credential
from tests.forms import browser_submission, form_data

HTMX = {"HX-Request": "true"}


def row(label: str, provider: str, model_name: str, config: object = None, **settings) -> dict:
    """A row as a browser submits it once its settings were drawn for ``provider``: the
    hidden ``settings_for``, the typed inputs, and the advanced JSON (a dict or its text)."""
    return {"label": label, "provider": provider, "model_name": model_name, "config": config or {}, **settings}


def post_data(dataset, rows: list[dict], **fields) -> dict:
    data = form_data(dataset, rows, **fields)
    for i, arm in enumerate(rows):
        data[f"arms-{i}-settings_for"] = arm.get("settings_for", arm["provider"])
        for name, value in arm.items():
            if name.startswith("set_") and value is not None:
                data[f"arms-{i}-{name}"] = value
    return data


def tag(page: str, name: str) -> str:
    """The opening tag of the input or select named ``name``."""
    found = re.search(rf'<(?:input|select|textarea)[^>]*\bname="{re.escape(name)}"[^>]*>', page)
    assert found, f"no input named {name}"
    return found[0]


def field_block(page: str, name: str) -> str:
    """The <div class="field"> holding the input named ``name``: its label, help and errors."""
    start = page.rindex('<div class="field', 0, page.index(f'name="{name}"'))
    return page[start : page.index("</div>", page.index(f'name="{name}"'))]


def options(page: str, name: str) -> list[str]:
    select = page[page.index(f'name="{name}"') :]
    return re.findall(r'<option value="([^"]*)"', select[: select.index("</select>")])


def saved_config(label: str) -> dict:
    return ModelArm.objects.get(label=label).config


@pytest.fixture
def local_server(org):
    """An OpenAI-compatible server: an arm of it needs the organisation's credential."""
    return credential(org, provider="openai_compatible", name="vllm", base_url="http://127.0.0.1:9/v1", key="")


# --- the settings each provider declares ------------------------------------------------------


def test_every_declared_setting_is_an_introspectable_check():
    for provider in provider_names():
        for name, setting in adapter_class(provider).config_keys.items():
            assert isinstance(setting, Setting), (provider, name)
            assert callable(setting) and setting.kind in {"number", "integer", "seconds", "boolean", "choice", "object"}
    mode = adapter_class("mock").config_keys["mode"]
    assert mode("noisy") is None and mode("bogus") == "must be one of oracle, noisy, empty, error, evaluator, wrong"


@pytest.mark.parametrize("provider", provider_names())
def test_each_providers_settings_render_as_typed_fields(bob, dataset, local_server, provider):
    """Changing the only row's provider and asking for its settings (the no-JS button) draws
    one input per declared setting, typed, labelled and explained by its declaration."""
    data = post_data(dataset, [row("a", provider, "m", settings_for="mock")]) | {"show_settings": "0"}
    response = client_for(bob).post(reverse("experiments:create"), data)

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    page = html.unescape(response.content.decode())
    assert tag(page, "arms-0-settings_for") == f'<input type="hidden" name="arms-0-settings_for" value="{provider}">'
    for key, setting in adapter_class(provider).config_keys.items():
        name = f"arms-0-set_{key}"
        if setting.kind == "object":  # only JSON can say it: named under the advanced field
            assert f'name="{name}"' not in page and f"<code>{key}</code> ({setting.help})" in page
            continue
        block = field_block(page, name)
        assert label_of(key, setting) in block and setting.help in block
        input_tag = tag(page, name)
        if setting.kind in ("number", "integer", "seconds"):
            assert 'type="number"' in input_tag
            assert f'max="{setting.high}"' in input_tag or f'max="{float(setting.high)!r}"' in input_tag
            assert ('step="1"' if setting.kind == "integer" else 'step="any"') in input_tag
        elif setting.kind == "choice":
            assert input_tag.startswith("<select") and options(page, name) == ["", *setting.values]
        elif setting.kind == "boolean":
            assert 'type="checkbox"' in input_tag and ("checked" in input_tag) == setting.default


def test_a_number_field_keeps_its_bounds_and_type(bob, dataset):
    page = client_for(bob).get(reverse("experiments:create")).content.decode()

    assert '<input type="number" name="arms-0-set_temperature" step="any" min="0" max="2"' in page
    assert 'step="1" min="1" max="1000000"' in tag(page, "arms-0-set_max_tokens")
    assert 'min="0.0" max="1.0"' in tag(page, "arms-0-set_quality")


# --- values: typed, checked by the one rule, merged with the advanced JSON ----------------------


def test_typed_settings_are_saved_as_json_values(bob, dataset):
    arm = row("typed", "mock", "mock-typed", set_mode="noisy", set_quality="0.7", set_latency_ms="200")
    response = client_for(bob).post(reverse("experiments:create"), post_data(dataset, [arm]))

    assert response.status_code == 302
    config = saved_config("typed")
    assert config == {"mode": "noisy", "quality": 0.7, "latency_ms": 200}
    assert isinstance(config["latency_ms"], int)  # 200 stays 200, not 200.0


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("set_temperature", "3", "config.temperature must be a number between 0 and 2"),
        ("set_max_tokens", "1.5", "config.max_tokens must be a whole number between 1 and 1000000"),
        ("set_quality", "-0.1", "config.quality must be a number between 0.0 and 1.0"),
        ("set_mode", "bogus", "config.mode must be one of oracle, noisy, empty, error, evaluator, wrong"),
        ("set_latency_ms", "soon", "config.latency_ms must be a number between 0 and 600000"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_the_field_and_the_arm(bob, dataset, field, value, problem):
    arm = row("fast", "mock", "mock-fast", **{field: value})
    response = client_for(bob).post(reverse("experiments:create"), post_data(dataset, [arm]))

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    page = html.unescape(response.content.decode())
    # Said next to the field itself, naming the arm: the same words as the spec and the API give.
    assert f"Arm 'fast': {problem}" in field_block(page, f"arms-0-{field}")


def test_typed_and_advanced_settings_merge(bob, dataset):
    advanced = {"mode": "noisy", "quality": 0.5, "temperature": 0.2}
    arm = row("both", "mock", "mock-both", advanced, set_temperature="0.2", set_max_tokens="64")
    response = client_for(bob).post(reverse("experiments:create"), post_data(dataset, [arm]))

    assert response.status_code == 302
    assert saved_config("both") == {"mode": "noisy", "quality": 0.5, "temperature": 0.2, "max_tokens": 64}


def test_a_key_given_differently_in_both_is_refused_naming_the_key_and_the_arm(bob, dataset):
    arm = row("torn", "mock", "mock-torn", {"temperature": 0.7}, set_temperature="0.2")
    response = client_for(bob).post(reverse("experiments:create"), post_data(dataset, [arm]))

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    page = html.unescape(response.content.decode())
    assert "Arm 'torn': config.temperature is 0.2 here but 0.7 in the advanced JSON" in field_block(
        page, "arms-0-set_temperature"
    )


def test_true_and_1_are_not_the_same_setting(bob, dataset, local_server):
    arm = row("vllm", "openai_compatible", "llama", {"stream": 1})  # the box unticked: stream false
    response = client_for(bob).post(reverse("experiments:create"), post_data(dataset, [arm]))

    assert response.status_code == 200
    assert "config.stream is false here but 1 in the advanced JSON" in html.unescape(response.content.decode())


def test_keys_the_adapter_does_not_declare_are_refused_as_before(bob, dataset):
    arm = row("typo", "mock", "mock-typo", {"qualty": 0.5}, set_quality="0.5")
    response = client_for(bob).post(reverse("experiments:create"), post_data(dataset, [arm]))

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    assert "Arm 'typo': config.qualty is not a mock setting" in html.unescape(response.content.decode())


def test_a_box_says_something_only_when_it_differs_from_the_default(bob, dataset, local_server):
    client = client_for(bob)
    unticked = row("plain", "openai_compatible", "llama", set_send_seed="on", set_structured_output="on")
    ticked = row(
        "streamed", "openai_compatible", "llama", set_stream="on", set_send_seed="on", set_structured_output="on"
    )
    response = client.post(reverse("experiments:create"), post_data(dataset, [unticked, ticked]))

    assert response.status_code == 302
    assert saved_config("plain") == {"stream": False}
    assert saved_config("streamed") == {}


def test_a_script_posting_json_only_is_read_as_before(bob, dataset, local_server):
    """No ``settings_for``: the row's inputs were never drawn, so an absent box says nothing."""
    data = form_data(dataset, [row("script", "openai_compatible", "llama", {"temperature": 0})])
    response = client_for(bob).post(reverse("experiments:create"), data)

    assert response.status_code == 302
    assert saved_config("script") == {"temperature": 0}


# --- changing a row's provider ----------------------------------------------------------------


def test_a_changed_provider_redraws_its_settings_without_javascript(bob, dataset, org):
    credential(org, provider="anthropic", name="claude")
    client = client_for(bob)
    arm = row("switched", "anthropic", "claude-haiku-4-5", {"max_tokens": 2048}, settings_for="mock")
    arm |= {"set_temperature": "0.3", "set_quality": "0.9", "set_mode": "noisy"}
    data = post_data(dataset, [arm], name="Kept as typed")

    response = client.post(reverse("experiments:create"), data)  # "Save experiment"

    assert response.status_code == 200  # shown again, with the new provider's settings
    assert not Experiment.objects.exists()
    page = html.unescape(response.content.decode())
    assert "Now showing the anthropic settings (it was mock)" in page
    assert 'value="Kept as typed"' in tag(page, "name") and 'value="switched"' in tag(page, "arms-0-label")
    assert 'value="0.3"' in tag(page, "arms-0-set_temperature")  # a setting both share keeps its value
    assert 'name="arms-0-set_thinking_budget_tokens"' in page
    assert 'name="arms-0-set_quality"' not in page and 'name="arms-0-set_mode"' not in page
    assert 'name="arms-0-set_stream"' in page and "checked" in tag(page, "arms-0-set_stream")  # the default
    assert '"max_tokens": 2048' in page
    assert "errorlist" not in page  # drawn again, not judged

    saved = client.post(reverse("experiments:create"), browser_submission(response.content.decode(), "arms-0-label"))

    assert saved.status_code == 302
    assert saved_config("switched") == {"max_tokens": 2048, "temperature": 0.3}


def test_a_changed_provider_redraws_the_row_with_htmx(bob, dataset, local_server):
    arm = row("switched", "openai_compatible", "llama", {"top_p": 0.5}, settings_for="mock", set_temperature="1")
    data = post_data(dataset, [arm]) | {"show_settings": "0"}
    response = client_for(bob).post(reverse("experiments:create"), data, headers=HTMX)

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    fragment = html.unescape(response.content.decode())
    assert fragment.lstrip().startswith('<fieldset class="arm" id="arms-0-row">') and "<html" not in fragment
    assert 'value="openai_compatible"' in tag(fragment, "arms-0-settings_for")
    assert 'value="1"' in tag(fragment, "arms-0-set_temperature")
    assert 'name="arms-0-set_reasoning_effort"' in fragment and '"top_p": 0.5' in fragment
    assert options(fragment, "arms-0-credential") == ["", "vllm"]  # the provider's own credentials


def test_the_provider_select_asks_for_its_row_with_htmx(bob):
    page = client_for(bob).get(reverse("experiments:create")).content.decode()

    holder = page[page.rindex("<div", 0, page.index('name="arms-0-provider"')) : page.index('name="arms-0-provider"')]
    assert f'hx-post="{reverse("experiments:create")}"' in holder and 'hx-trigger="change"' in holder
    assert 'hx-vals=\'{"show_settings": "0"}\'' in holder
    assert '<noscript><button type="submit" class="secondary" name="show_settings" value="0"' in page


# --- adding and removing rows -----------------------------------------------------------------


def three_rows(dataset) -> dict:
    return post_data(
        dataset,
        [row("one", "mock", "m1"), row("two", "mock", "m2", set_quality="0.4"), row("three", "mock", "m3")],
        name="Three arms",
    )


def test_add_an_arm_without_javascript(bob, dataset):
    data = three_rows(dataset) | {"add_arm": "1", "arms-1-set_quality": "7"}  # out of range, not judged yet
    response = client_for(bob).post(reverse("experiments:create"), data)

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    page = response.content.decode()
    assert 'name="arms-TOTAL_FORMS" value="4"' in page
    assert 'value="two"' in tag(page, "arms-1-label") and 'value="7"' in tag(page, "arms-1-set_quality")
    assert 'value="mock"' in tag(page, "arms-3-settings_for") and "value=" not in tag(page, "arms-3-label")
    assert 'value="Three arms"' in tag(page, "name")
    assert "errorlist" not in page


def test_add_an_arm_with_htmx(bob, dataset):
    response = client_for(bob).post(reverse("experiments:create"), three_rows(dataset) | {"add_arm": "1"}, headers=HTMX)

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<fieldset class="arm" id="arms-3-row">') and "<html" not in fragment
    assert 'name="arms-3-label"' in fragment and 'name="arms-2-label"' not in fragment
    assert '<input type="hidden" name="arms-TOTAL_FORMS" value="4" id="id_arms-TOTAL_FORMS" hx-swap-oob="true">' in (
        fragment
    )


def test_the_add_button_posts_the_form_with_htmx_and_without(bob):
    page = client_for(bob).get(reverse("experiments:create")).content.decode()

    button = re.search(r"<button[^>]*name=\"add_arm\"[^>]*>", page)[0]
    assert 'type="submit"' in button and "formnovalidate" in button
    assert f'hx-post="{reverse("experiments:create")}"' in button and 'hx-target="#arm-rows"' in button


def test_remove_an_arm_without_javascript(bob, dataset):
    response = client_for(bob).post(reverse("experiments:create"), three_rows(dataset) | {"remove_arm": "1"})

    assert response.status_code == 200
    assert not Experiment.objects.exists()
    page = response.content.decode()
    assert 'name="arms-TOTAL_FORMS" value="2"' in page
    assert 'value="one"' in tag(page, "arms-0-label") and 'value="three"' in tag(page, "arms-1-label")
    assert 'name="arms-2-label"' not in page and 'value="0.4"' not in page

    saved = client_for(bob).post(reverse("experiments:create"), browser_submission(page, "arms-0-label"))

    assert saved.status_code == 302
    assert list(Experiment.objects.get().arms.values_list("label", flat=True)) == ["one", "three"]


def test_remove_an_arm_with_htmx(bob, dataset):
    response = client_for(bob).post(
        reverse("experiments:create"), three_rows(dataset) | {"remove_arm": "0"}, headers=HTMX
    )

    assert response.status_code == 200
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<section id="arms">') and "<html" not in fragment
    assert 'name="arms-TOTAL_FORMS" value="2"' in fragment
    assert 'value="two"' in tag(fragment, "arms-0-label") and 'value="0.4"' in tag(fragment, "arms-0-set_quality")


def test_any_number_of_arms_save_from_one_page(bob, dataset):
    rows = [row(f"arm-{i}", "mock", f"mock-{i}", set_quality=str(i / 10)) for i in range(7)]
    response = client_for(bob).post(reverse("experiments:create"), post_data(dataset, rows))

    assert response.status_code == 302
    assert [a.config for a in Experiment.objects.get().arms.all()] == [{"quality": i / 10} for i in range(7)]


# --- editing later, and the settings as JSON on the experiment page ------------------------------

MOCK_CONFIG = {"mode": "noisy", "quality": 0.7, "latency_ms": 200, "max_retries": 1, "temperature": 0.0}
SERVER_CONFIG = {"stream": False, "send_seed": True, "extra_body": {"top_k": 20}, "max_tokens": 512, "top_p": 0.9}


@pytest.fixture
def saved(org, dataset, local_server, bob):
    arms = [
        ArmSpec("noisy", "mock", "mock-noisy", MOCK_CONFIG),
        ArmSpec("vllm", "openai_compatible", "llama", SERVER_CONFIG, credential="vllm"),
    ]
    return do_save_experiment(org, ExperimentSpec(name="Saved", dataset=dataset, arms=arms), bob)


def test_the_edit_page_prefills_every_typed_field_from_the_saved_config(bob, saved):
    page = client_for(bob).get(reverse("experiments:edit", args=[saved.code])).content.decode()

    assert 'value="0.7"' in tag(page, "arms-0-set_quality") and 'value="200"' in tag(page, "arms-0-set_latency_ms")
    assert 'value="1"' in tag(page, "arms-0-set_max_retries") and 'value="0.0"' in tag(page, "arms-0-set_temperature")
    assert '<option value="noisy" selected>' in page
    assert 'value="512"' in tag(page, "arms-1-set_max_tokens") and 'value="0.9"' in tag(page, "arms-1-set_top_p")
    assert "checked" not in tag(page, "arms-1-set_stream")
    assert "checked" in tag(page, "arms-1-set_send_seed")
    # What no input can hold exactly stays JSON: an object, and a box set to its own default.
    advanced = json.loads(html.unescape(re.search(r'name="arms-1-config"[^>]*>\n?([^<]*)</textarea>', page)[1]))
    assert advanced == {"send_seed": True, "extra_body": {"top_k": 20}}
    assert "<textarea" in page and "{}</textarea>" in page  # the mock arm's advanced field is empty


def test_saving_the_edit_page_unchanged_keeps_every_config_exactly(bob, saved):
    client = client_for(bob)
    url = reverse("experiments:edit", args=[saved.code])
    data = browser_submission(client.get(url).content.decode(), "arms-TOTAL_FORMS")

    response = client.post(url, data)

    assert response.status_code == 302
    configs = dict(saved.arms.values_list("label", "config"))
    assert configs == {"noisy": MOCK_CONFIG, "vllm": SERVER_CONFIG}
    assert {k: type(v) for k, v in configs["noisy"].items()} == {k: type(v) for k, v in MOCK_CONFIG.items()}


def test_the_experiment_page_shows_settings_as_json_that_pastes_back(bob, saved, dataset):
    client = client_for(bob)
    page = client.get(reverse("experiments:detail", args=[saved.code])).content.decode()
    shown = [html.unescape(text) for text in re.findall(r'<code class="arm-config">([^<]*)</code>', page)]
    assert [json.loads(text) for text in shown] == [MOCK_CONFIG, SERVER_CONFIG]

    # Pasted into the advanced field of fresh rows, as a browser submits them: the same configs.
    create = client.get(reverse("experiments:create")).content.decode()
    data = browser_submission(create, "arms-TOTAL_FORMS") | {"name": "Pasted", "dataset": str(dataset.pk)}
    data |= {"arms-0-label": "noisy", "arms-0-model_name": "mock-noisy", "arms-0-config": shown[0]}
    switched = client.post(reverse("experiments:create"), data | {"add_arm": "1"})
    data = browser_submission(switched.content.decode(), "arms-TOTAL_FORMS")
    data |= {"arms-1-label": "vllm", "arms-1-provider": "openai_compatible", "arms-1-model_name": "llama"}
    drawn = client.post(reverse("experiments:create"), data | {"show_settings": "1"})
    data = browser_submission(drawn.content.decode(), "arms-TOTAL_FORMS") | {"arms-1-config": shown[1]}

    response = client.post(reverse("experiments:create"), data)

    assert response.status_code == 302
    pasted = Experiment.objects.get(name="Pasted")
    assert dict(pasted.arms.values_list("label", "config")) == {"noisy": MOCK_CONFIG, "vllm": SERVER_CONFIG}


# --- access and the page's rules ------------------------------------------------------------------


@pytest.mark.parametrize("action", [{"add_arm": "1"}, {"remove_arm": "0"}, {"show_settings": "0"}])
@pytest.mark.parametrize("headers", [{}, HTMX])
def test_an_outsider_gets_404_on_every_row_action(charlie, saved, dataset, action, headers):
    data = post_data(dataset, [row("x", "mock", "m")]) | action
    before = list(ModelArm.objects.values_list("pk", "config"))

    response = client_for(charlie).post(reverse("experiments:edit", args=[saved.code]), data, headers=headers)

    assert response.status_code == 404
    assert list(ModelArm.objects.values_list("pk", "config")) == before


def test_a_viewer_cannot_use_the_row_actions(vera, saved, dataset):
    data = post_data(dataset, [row("x", "mock", "m")]) | {"add_arm": "1"}
    assert client_for(vera).post(reverse("experiments:edit", args=[saved.code]), data, headers=HTMX).status_code == 403


def test_enter_in_a_field_saves(bob):
    """A browser submits with the form's first submit button when Enter is pressed in a field:
    it must be a save, not a row's "Remove" or "Add an arm"."""
    page = client_for(bob).get(reverse("experiments:create")).content.decode()
    form = page[page.index('<form method="post"') :]

    first = re.search(r"<button[^>]*>", form)[0]
    assert 'type="submit"' in first and "name=" not in first and "hx-" not in first


def test_the_form_has_no_inline_script_or_style(bob, saved):
    for url in (reverse("experiments:create"), reverse("experiments:edit", args=[saved.code])):
        page = client_for(bob).get(url).content.decode()
        assert "<script>" not in page and "<style" not in page and " style=" not in page
        scripts = re.findall(r"<script[^>]*>", page)
        assert len(scripts) == 1 and "vendor/htmx" in scripts[0] and " src=" in scripts[0]
