"""Forms as a browser posts them: the experiment form with its arms formset, and what a page's
own forms would submit."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from experiments.models import DEFAULT_PROMPT

ORACLE = {"label": "oracle", "provider": "mock", "model_name": "mock-oracle", "config": {"mode": "oracle"}}


def form_data(dataset, arms: list[dict], **fields) -> dict:
    """A POST for the experiment form with the ``arms`` formset."""
    data = {
        "name": "Shootout",
        "description": "Two mocks",
        "dataset": str(dataset.pk),
        "sample_size": "3",
        "sample_strategy": "first",
        "sample_seed": "5",
        "repetitions": "2",
        "prompt_template": DEFAULT_PROMPT,
        "arms-TOTAL_FORMS": str(len(arms)),
        "arms-INITIAL_FORMS": "0",
        "arms-MIN_NUM_FORMS": "0",
        "arms-MAX_NUM_FORMS": "1000",
    }
    for i, arm in enumerate(arms):
        config = arm.get("config", {})
        data |= {
            f"arms-{i}-label": arm["label"],
            f"arms-{i}-provider": arm["provider"],
            f"arms-{i}-model_name": arm["model_name"],
            f"arms-{i}-config": config if isinstance(config, str) else json.dumps(config),
        }
    return data | {k: str(v) for k, v in fields.items()}


class _BrowserForm(HTMLParser):
    """Collects what a browser would submit for each <form method="post"> on a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms: list[dict] = []
        self._form: dict | None = None
        self._select: str | None = None
        self._select_chosen = False
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("method") == "post":
            self._form = {}
        elif self._form is None:
            return
        elif tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self._form[a["name"]] = a.get("value", "on")
            elif kind not in ("submit", "button", "image"):
                self._form[a["name"]] = a.get("value") or ""
        elif tag == "select":
            self._select, self._select_chosen = a["name"], False
        elif tag == "option" and self._select:
            value = a.get("value", "")
            if "selected" in a:
                self._form[self._select], self._select_chosen = value, True
            elif not self._select_chosen and self._select not in self._form:
                self._form[self._select] = value  # a browser submits the first option
        elif tag == "textarea":
            self._textarea, self._text = a["name"], []

    def handle_data(self, data):
        if self._textarea:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "form" and self._form is not None:
            self.forms.append(self._form)
            self._form = None
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea and self._form is not None:
            text = "".join(self._text)
            self._form[self._textarea] = text[1:] if text.startswith("\n") else text  # as browsers do
            self._textarea = None


def browser_submission(html: str, marker: str) -> dict:
    parser = _BrowserForm()
    parser.feed(html)
    (form,) = [f for f in parser.forms if marker in f]
    return form
