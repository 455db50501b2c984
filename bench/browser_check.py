"""Drive the running demo in headless Chromium: log in, start a run, watch htmx progress.

    .venv/bin/python bench/browser_check.py [--base http://127.0.0.1:8000] [--out var/screens] [--var-dir var]

Needs Debian's chromium (/usr/bin/chromium). Prints what it checked and saves screenshots.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--out", default="var/screens")
    # The demo's PRBENCH_VAR_DIR: its embedded Redis, where the queue check puts jobs that fail.
    parser.add_argument("--var-dir", default="var")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        # Every page runs under a strict Content-Security-Policy: anything it refuses shows up here.
        refused: list[str] = []
        page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(f"{args.base}/accounts/login/")
        page.fill("input[name=login]", "demo@prbench.local")
        page.fill("input[name=password]", "prbench-demo")
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text("Experiments")
        page.screenshot(path=out / "1-experiments.png", full_page=True)
        print("logged in; experiments list shows", page.locator("tbody tr").count(), "rows")

        page.click("text=Demo: mock arms, single-turn and agent")
        page.screenshot(path=out / "2-experiment.png", full_page=True)
        page.click("text=Start run")
        expect(page.locator("h1")).to_have_text("Start a run")  # the estimate comes first
        page.fill("input[name=budget_usd]", "5")
        page.click("button:has-text('Update estimate')")
        expect(page.locator("table.estimate tfoot")).to_contain_text("$")
        print("confirm page:", " ".join(page.locator("table.estimate tfoot").inner_text().split()))
        page.screenshot(path=out / "2b-confirm.png", full_page=True)
        page.click("button:has-text('Start run')")
        expect(page.locator("#live .status")).to_be_visible()
        first = page.locator("#live .runbar").inner_text()
        page.screenshot(path=out / "3-run-live.png", full_page=True)
        started = time.monotonic()
        expect(page.locator("#live .status")).to_have_text("completed", timeout=120_000)
        print(f"run page went from {first!r} to completed by htmx polling in {time.monotonic() - started:.1f}s")
        assert "hx-trigger" not in (page.locator("#live").get_attribute("hx-trigger") or ""), "polling should stop"
        page.reload()
        page.screenshot(path=out / "4-run-done.png", full_page=True)

        page.locator("table.attempts tbody tr td:nth-child(2) a").first.click()
        expect(page.locator("h2", has_text="Gold patch")).to_be_visible()
        print("task page:", page.locator("section.card").count(), "arms side by side")
        page.screenshot(path=out / "4b-task.png", full_page=True)
        page.go_back()

        page.locator("table.attempts tbody tr td a").first.click()
        expect(page.locator("h2", has_text="What was read")).to_be_visible()
        page.screenshot(path=out / "5-attempt.png", full_page=True)
        print("attempt page:", page.locator("h1").inner_text())

        page.go_back()
        page.goto(f"{args.base}/experiments/")
        page.click("text=Demo: mock arms, single-turn and agent")
        page.click("text=Edit")
        page.screenshot(path=out / "6-edit.png", full_page=True)
        page.click("button:has-text('Save experiment')")
        expect(page.locator(".messages")).to_contain_text("Saved")
        print("edit form saves unchanged, as a browser submits it")

        check_arm_form(page, args.base, out)
        check_arm_form_without_javascript(browser, args.base, out)
        check_boards(page, args.base, out)
        check_question_run(page, args.base, out)
        check_repository_pages(page, args.base, out)
        check_transcripts(page, args.base, out)
        check_agent_attempt(page, args.base, out)
        check_question_experiments(page, args.base, out)
        check_evaluator_admin(page, args.base, out)
        check_queue_admin(page, args.base, Path(args.var_dir), out)
        check_providers_page(page, out)
        check_members_page(page, args.base, out)
        check_api_pages(page, args.base, out)
        assert not refused, f"the CSP refused: {refused}"
        print("no page broke the Content-Security-Policy")
        browser.close()


def check_arm_form(page, base: str, out: Path) -> None:
    """Build an experiment's arms with htmx: add rows, switch a row's provider (its settings
    follow), remove one, give a setting as JSON; save; the experiment page shows each arm's
    settings as JSON; the edit page comes back filled."""
    page.goto(f"{base}/experiments/new/")
    name = f"Arm form {time.strftime('%H:%M:%S')}"  # the script can run again on the same demo
    page.fill("input[name=name]", name)
    page.select_option("select[name=dataset]", label="Demo: small Python bugs")
    page.fill("input[name=sample_size]", "2")
    page.fill("input[name=arms-0-label]", "oracle")
    page.fill("input[name=arms-0-model_name]", "mock-oracle")
    page.select_option("select[name=arms-0-set_mode]", "oracle")
    page.click("button:has-text('Add an arm')")
    expect(page.locator("#arms-1-row")).to_be_visible()
    expect(page.locator("#id_arms-TOTAL_FORMS")).to_have_value("2")
    page.fill("input[name=arms-1-label]", "noisy")
    page.fill("input[name=arms-1-model_name]", "mock-noisy")
    page.select_option("select[name=arms-1-set_mode]", "noisy")
    page.fill("input[name=arms-1-set_quality]", "0.6")
    page.fill("input[name=arms-1-set_temperature]", "0.2")
    page.click("button:has-text('Add an arm')")
    expect(page.locator("#arms-2-row")).to_be_visible()
    page.fill("input[name=arms-2-label]", "local")
    page.fill("input[name=arms-2-set_temperature]", "0.4")
    page.select_option("select[name=arms-2-provider]", "openai_compatible")  # htmx redraws the row
    expect(page.locator("select[name=arms-2-set_reasoning_effort]")).to_be_visible()
    expect(page.locator("input[name=arms-2-set_temperature]")).to_have_value("0.4")  # shared settings stay
    expect(page.locator("input[name=arms-2-label]")).to_have_value("local")
    assert page.locator("input[name=arms-2-set_quality]").count() == 0, "the mock's settings went with it"
    labels = page.locator("#arms-2-row > .settings label").all_inner_texts()
    print("a row switched to openai_compatible shows:", ", ".join(text.strip(" :") for text in labels))
    # Of the viewport: after a full-page shot headless Chromium's next click lands beside the
    # button. caret="initial": hiding the caret of the input htmx kept focused injects a style
    # the CSP refuses.
    page.locator("#arms-2-row").scroll_into_view_if_needed()
    page.screenshot(path=out / "6a-arm-form.png", caret="initial")
    page.locator("#arms-2-row button:has-text('Remove this arm')").click()
    expect(page.locator("#arms-2-row")).to_have_count(0)
    expect(page.locator("#id_arms-TOTAL_FORMS")).to_have_value("2")
    page.locator("#arms-1-row summary:has-text('Advanced')").click()
    page.fill("textarea[name=arms-1-config]", '{"latency_ms": 5, "temperature": 0.2}')
    page.click("button:has-text('Save experiment')")
    expect(page.locator(".messages")).to_contain_text("Saved")
    settings = page.locator("code.arm-config").all_inner_texts()
    print("experiment page, each arm's settings as JSON:", settings)
    assert json.loads(settings[1]) == {"mode": "noisy", "quality": 0.6, "temperature": 0.2, "latency_ms": 5}
    page.screenshot(path=out / "6b-arm-settings.png", full_page=True, caret="initial")
    page.click("text=Edit")
    expect(page.locator("input[name=arms-1-set_quality]")).to_have_value("0.6")
    expect(page.locator("input[name=arms-1-set_latency_ms]")).to_have_value("5")
    expect(page.locator("select[name=arms-1-set_mode]")).to_have_value("noisy")
    page.press("input[name=name]", "Enter")  # saves: the form's first button is a save
    expect(page.locator(".messages")).to_contain_text("Saved")
    again = [json.loads(text) for text in page.locator("code.arm-config").all_inner_texts()]
    assert again == [json.loads(text) for text in settings], "saved again unchanged"
    print("edit page pre-filled every typed setting; saved again, the settings are unchanged")


def check_arm_form_without_javascript(browser, base: str, out: Path) -> None:
    """The same form with JavaScript off: buttons submit, the page comes back redrawn."""
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=login]", "demo@prbench.local")
    page.fill("input[name=password]", "prbench-demo")
    page.click("button[type=submit]")
    page.goto(f"{base}/experiments/new/")
    name = f"No JS {time.strftime('%H:%M:%S')}"
    page.fill("input[name=name]", name)
    page.select_option("select[name=dataset]", label="Demo: small Python bugs")
    page.fill("input[name=arms-0-label]", "first")
    page.fill("input[name=arms-0-model_name]", "mock-first")
    page.click("button:has-text('Add an arm')")  # a submit: the page comes back with a second row
    expect(page.locator("#arms-1-row")).to_be_visible()
    expect(page.locator("input[name=name]")).to_have_value(name)
    page.fill("input[name=arms-1-label]", "second")
    page.fill("input[name=arms-1-model_name]", "claude-haiku-4-5")
    page.select_option("select[name=arms-1-provider]", "anthropic")
    page.locator("#arms-1-row button:has-text('Show this provider')").click()
    expect(page.locator("input[name=arms-1-set_thinking_budget_tokens]")).to_be_visible()
    expect(page.locator("#arms-1-row .notice")).to_contain_text("Now showing the anthropic settings")
    page.select_option("select[name=arms-1-provider]", "mock")
    page.click("button:has-text('Save experiment')")  # the provider changed again: redrawn, not saved
    expect(page.locator("select[name=arms-1-set_mode]")).to_be_visible()
    page.select_option("select[name=arms-1-set_mode]", "wrong")
    page.click("button:has-text('Save experiment')")
    expect(page.locator(".messages")).to_contain_text("Saved")
    page.screenshot(path=out / "6c-arm-form-no-js.png", full_page=True, caret="initial")
    print(
        "without JavaScript: added a row, switched its provider twice, saved:",
        page.locator("code.arm-config").all_inner_texts(),
    )
    context.close()


def check_boards(page, base: str, out: Path) -> None:
    """The demo run's boards: a column sorts through htmx (the URL follows), the charts are
    drawn, and the pairwise page states its verdicts in words beside its heatmap."""
    page.goto(f"{base}/experiments/")
    page.click("text=Demo: mock arms, single-turn and agent")
    page.locator("table tbody tr td a").last.click()  # its first run (the demo's)
    expect(page.locator("#live .status")).to_have_text("completed")
    quality = page.locator("#board-quality table.quality tbody tr td:nth-child(2)")
    before = [text.split()[0] for text in quality.all_inner_texts()]
    page.locator("#board-quality th a.sort", has_text="Arm").click()
    expect(page).to_have_url(re.compile(r"quality_sort=arm"))
    after = [text.split()[0] for text in quality.all_inner_texts()]
    assert after == sorted(after), after
    print("quality board by rank:", before, "| sorted by arm through htmx:", after)
    charts = page.locator("figure.chart svg").count()
    print("run page charts drawn:", charts, "| tables beside them:", page.locator("table.chart-table").count())
    page.screenshot(path=out / "4c-run-boards.png", full_page=True)
    page.click("text=Pairwise verdicts")
    expect(page.locator("h1")).to_have_text("Pairwise verdicts")
    print("pairwise:", page.locator("ul.verdicts li").first.inner_text())
    print(
        "heatmap cells:",
        page.locator("figure.heatmap rect.cell").count(),
        "| ratings:",
        page.locator("table.ratings tbody tr").count(),
    )
    page.screenshot(path=out / "4d-pairwise.png", full_page=True)


TRANSCRIPT = ("What was asked", "What came back", "What was read", "What was expected", "How it was graded")
# An agent's attempt shows its steps between what it was asked and what came back.
AGENT_TRANSCRIPT = ("What was asked", "What the agent did", *TRANSCRIPT[1:])


def check_transcripts(page, base: str, out: Path) -> None:
    """One attempt of each demo experiment (a PR patch, multiple choice, code): its transcript's
    sections in order, the prompt it was sent (a long one folded, opened here), the kind's row."""
    for name, quality in (
        ("Demo: mock arms, single-turn and agent", "Resolved"),
        ("Demo: multiple choice, how sure?", "Correct"),
        ("Demo: code that runs", "Passed"),
    ):
        page.goto(f"{base}/experiments/")
        page.click(f"text={name}")
        page.locator("a[href^='/runs/']").first.click()
        page.locator("table.attempts tbody tr td a[href^='/attempts/']").last.click()
        headings = page.locator("section.transcript h2").all_inner_texts()
        assert headings in (list(TRANSCRIPT), list(AGENT_TRANSCRIPT)), headings
        assert page.locator(f"dl.facts dt:text-is('{quality}')").count() == 1, quality
        for fold in page.locator("section.transcript details.fold summary").all():
            fold.click()  # a long prompt (a PR task's files) opens in place
        role = page.locator("h3.message-role").first.inner_text()
        verdict = page.locator(f"dl.facts dt:text-is('{quality}') + dd").inner_text()
        stem = name.split(": ")[1].split(",")[0].replace(" ", "-")
        page.screenshot(path=out / f"17-transcript-{stem}.png", full_page=True)
        print(f"transcript of {name!r}: {role}; {quality}: {verdict}")


def check_agent_attempt(page, base: str, out: Path) -> None:
    """The demo's agent arm: an attempt's steps, in order, with a tool's output opened."""
    page.goto(f"{base}/experiments/")
    page.click("text=Demo: mock arms, single-turn and agent")
    page.locator("a[href^='/runs/']").first.click()
    assert page.locator("text=careful-agent (agent)").count() >= 1, "the agent arm is not named as one"
    page.locator("table.attempts tbody tr:has-text('careful-agent') td a[href^='/attempts/']").first.click()
    steps = page.locator("section.trajectory ol.steps > li")
    assert steps.count() >= 3, steps.count()
    calls = page.locator("section.trajectory div.tool-call p code").all_inner_texts()
    assert calls[0] == "list_files" and calls[-1] == "submit", calls
    page.locator("section.trajectory details.tool-output summary").nth(1).click()
    ended = page.locator("section.trajectory p.ended").inner_text()
    page.screenshot(path=out / "18-agent-trajectory.png", full_page=True)
    print(f"agent attempt: {steps.count()} turns, calls {calls}; {ended}")


# The question datasets of the demo, the first line of their kind's default prompt, and a word
# of what their attempt page calls a success.
QUESTION_DATASETS = (
    ("Demo: Jeopardy sample", "This is a Jeopardy! clue.", "Correct"),
    ("Demo: MMLU sample", "Answer the following multiple-choice question.", "Correct"),
    ("Demo: HumanEval sample", "Complete the following Python function.", "Passed"),
)


def check_question_experiments(page, base: str, out: Path) -> None:
    """A Jeopardy, an MMLU and a HumanEval experiment built in the browser as a new customer
    would: choose the dataset (htmx swaps in its kind's prompt, the default left as it is),
    two mock arms, save, start, watch it finish; then the oracle's attempt page shows the
    question as sent, the answer, what was read and expected, and the oracle scored 100%."""
    stamp = time.strftime("%H%M%S")
    for dataset, first_line, quality in QUESTION_DATASETS:
        page.goto(f"{base}/experiments/new/")
        name = f"{dataset.split(': ')[1]} in the browser {stamp}"
        page.fill("input[name=name]", name)
        page.select_option("select[name=dataset]", label=dataset)
        prompt = page.locator("textarea[name=prompt_template]")
        expect(prompt).to_have_value(re.compile("^" + re.escape(first_line)))
        assert "{{repository}}" not in prompt.input_value(), "a question kind must not be asked for files"
        page.fill("input[name=sample_size]", "4")
        page.fill("input[name=arms-0-label]", "oracle")
        page.fill("input[name=arms-0-model_name]", "mock-oracle")
        page.select_option("select[name=arms-0-set_mode]", "oracle")
        page.click("button:has-text('Add an arm')")
        expect(page.locator("#arms-1-row")).to_be_visible()
        page.fill("input[name=arms-1-label]", "wrong")
        page.fill("input[name=arms-1-model_name]", "mock-wrong")
        page.select_option("select[name=arms-1-set_mode]", "wrong")
        page.click("button:has-text('Save experiment')")
        expect(page.locator(".messages")).to_contain_text("Saved")
        page.click("text=Start run")
        page.click("button:has-text('Start run')")
        expect(page.locator("#live .status")).to_have_text("completed", timeout=120_000)
        page.reload()
        page.screenshot(path=out / f"18-{dataset.split(': ')[1].split()[0]}-run.png", full_page=True)
        oracle = page.locator("table.attempts tbody tr", has_text="oracle").first
        oracle.locator("a[href^='/attempts/']").first.click()
        sent = page.locator("section.transcript").inner_text()
        assert first_line in sent, f"{dataset}: the attempt was not sent its kind's prompt"
        assert "{{" not in sent and "unified diff" not in sent, f"{dataset}: the pull-request prompt was sent"
        verdict = page.locator(f"dl.facts dt:text-is('{quality}') + dd").inner_text()
        assert not verdict.startswith(("wrong", "not")), f"{dataset}: the oracle's answer was {verdict!r}"
        read = page.locator("section.transcript h2:text-is('What was read') + *").first.inner_text()
        page.screenshot(path=out / f"19-{dataset.split(': ')[1].split()[0]}-attempt.png", full_page=True)
        print(f"{name!r}: built in the browser with {first_line!r}; oracle attempt {quality}: {verdict}; read {read!r}")


def check_question_run(page, base: str, out: Path) -> None:
    """A multiple-choice run in its own words: its boards fill in while it records, its
    attempts say "wrong: B, expected D" and filter to the wrong ones, its task page shows
    the options and the expected answer, the matrix shows every arm's letters, and the
    dataset page its questions and choices."""
    page.goto(f"{base}/experiments/")
    page.click("text=Demo: multiple choice, how sure?")
    page.click("text=Start run")
    page.click("button:has-text('Start run')")
    expect(page.locator("#live .status")).to_be_visible()
    started, first_figures = time.monotonic(), None
    scored = page.locator("#board-quality table tbody tr td:nth-child(3)")
    while page.locator("#live .status").inner_text() == "running" and time.monotonic() - started < 120:
        if first_figures is None and any(text.strip() not in ("", "0") for text in scored.all_inner_texts()):
            first_figures = time.monotonic() - started
            page.screenshot(path=out / "12-question-run-recording.png", full_page=True)
        time.sleep(0.2)
    expect(page.locator("#live .status")).to_have_text("completed", timeout=120_000)
    took = time.monotonic() - started
    print(f"question run: boards first showed figures after {first_figures}s of a {took:.1f}s run")
    results = page.locator("table.attempts td.result").all_inner_texts()
    assert any(r.startswith("wrong: ") and ", expected " in r for r in results), results
    assert not any(r in ("no patch", "did not apply", "tests fail") for r in results), results
    assert page.locator("#board-evaluator").count() == 0, "a quiz is never judged: no evaluator board"
    page.select_option("select[name=result]", "wrong")
    page.click("form.filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"result=wrong"))
    wrong = page.locator("table.attempts td.result").all_inner_texts()
    assert wrong and all(r.startswith("wrong: ") for r in wrong), wrong
    print("wrong answers only:", wrong[:3], "| task:", page.locator("table.attempts td.task").first.inner_text())
    page.screenshot(path=out / "13-question-wrong-answers.png", full_page=True)
    page.locator("table.attempts td.task a").first.click()
    expect(page.locator("h2", has_text="Expected answer")).to_be_visible()
    print("task page:", page.locator("ol.choices li").count(), "options,", page.locator("p.expected").inner_text())
    page.screenshot(path=out / "14-question-task.png", full_page=True)
    page.click("text=answers")
    expect(page.locator("table.matrix")).to_be_visible()
    columns = " · ".join(page.locator("table.matrix thead th").all_inner_texts())
    print("answers matrix:", page.locator("table.matrix tbody tr").count(), "tasks |", columns)
    page.screenshot(path=out / "15-question-matrix.png", full_page=True)
    page.goto(f"{base}/datasets/")
    page.click("text=Demo: MMLU sample")
    expect(page.locator("th", has_text="Choices")).to_be_visible()
    page.screenshot(path=out / "16-question-dataset.png", full_page=True)


def check_evaluator_admin(page, base: str, out: Path) -> None:
    """Staff see a verdict's rationale in the admin (customers never do)."""
    page.goto(f"{base}/admin/evaluation/verdict/")
    page.locator("#result_list tbody tr th a").first.click()
    rationale = page.locator(".field-rationale .readonly").inner_text()
    print("admin verdict rationale:", rationale[:80])
    page.screenshot(path=out / "11-admin-verdict.png", full_page=True)
    page.goto(f"{base}/experiments/")  # back to the product's own pages


def check_queue_admin(page, base: str, var_dir: Path, out: Path) -> None:
    """django-rq's queue pages work under the Content-Security-Policy (their inline script and
    styles are allowed by hash): three jobs that cannot run fail in the demo's worker, then the
    failed list's header box selects them all and the Delete bulk action, confirmed, empties it."""
    import redis
    import rq

    connection = redis.Redis(unix_socket_path=str(var_dir / "redis.sock"))
    queue = rq.Queue("default", connection=connection)
    for n in range(3):
        queue.enqueue(f"os.path.no_such_function_{n}")  # the worker fails them: the failed list fills
    registry = rq.registry.FailedJobRegistry(queue=queue)
    deadline = time.monotonic() + 60
    while registry.count < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    page.goto(f"{base}/admin/django_rq/dashboard/queues/0/failed/")
    jobs = page.locator("tr input.action-select").count()
    page.click("#action-toggle")
    assert all(box.is_checked() for box in page.locator("tr input.action-select").all()), "select-all did nothing"
    page.select_option("select[name=action]", "delete")
    page.click("button:has-text('Go')")
    page.screenshot(path=out / "11b-admin-queue-confirm.png", full_page=True)
    page.click(f"input[type=submit][value='Delete {jobs} jobs']")
    assert registry.count == 0, f"{registry.count} failed jobs left after the bulk delete"
    print(f"django-rq failed jobs: {jobs} selected with one click and deleted in bulk")
    page.goto(f"{base}/experiments/")


def check_repository_pages(page, base: str, out: Path) -> None:
    """The textkit experiment: its run's attempt page (per-test roles) and the dataset
    page (the quarantined task, and why)."""
    page.goto(f"{base}/experiments/")
    page.click("text=Demo: textkit bug fixes")
    expect(page.locator("dd", has_text="Retrieved: BM25")).to_be_visible()
    page.screenshot(path=out / "8-textkit-experiment.png", full_page=True)
    page.locator("table tbody tr td a").last.click()  # its first run (the demo's)
    expect(page.locator("#live .status")).to_have_text("completed")
    page.locator("table.attempts tbody tr td a").first.click()
    expect(page.locator("td", has_text="must fix").first).to_be_visible()
    roles = page.locator("table.tests tbody tr").count()
    print("textkit attempt:", page.locator('dt:has-text("Task\'s tests") + dd').inner_text(), f"({roles} tests)")
    page.screenshot(path=out / "9-textkit-attempt.png", full_page=True)
    page.goto(f"{base}/datasets/")
    page.click("text=Demo: textkit repository")
    reason = page.locator("tr.quarantined td").last.inner_text()
    print("textkit dataset:", reason[:140])
    page.screenshot(path=out / "10-textkit-dataset.png", full_page=True)


def check_providers_page(page, out: Path) -> None:
    """Save a credential with rate limits, then Edit: the form comes back filled, key empty."""
    page.click("nav >> text=Providers")
    page.select_option("#cred-provider", "openai_compatible")
    name = f"vLLM on gpu-box {time.strftime('%H:%M:%S')}"  # the script can run again on the same demo
    page.fill("#cred-name", name)
    page.fill("#cred-key", "sk-browser-check-0000")
    page.fill("#cred-url", "http://127.0.0.1:9/v1")
    page.fill("#cred-rpm", "120")
    page.fill("#cred-tpm", "90000")
    page.click("button:has-text('Save credential')")
    expect(page.locator(".messages")).to_contain_text("Saved")
    row = page.locator("tr", has_text=name)
    expect(row).to_contain_text("120")
    assert "sk-browser-check" not in page.content(), "the key must never come back"
    row.locator("text=Edit").click()
    expect(page.locator("#cred-rpm")).to_have_value("120")
    expect(page.locator("#cred-url")).to_have_value("http://127.0.0.1:9/v1")
    expect(page.locator("#cred-key")).to_have_value("")
    page.screenshot(path=out / "7-providers-edit.png", full_page=True)
    row.locator("button:has-text('Test connection')").click()
    report = row.locator(".connection")
    expect(report).to_contain_text("connection", timeout=30_000)
    page.screenshot(path=out / "8-providers-test.png", full_page=True)
    print("providers page: credential saved with limits, Edit pre-fills it, test connection:", report.inner_text())
    page.click("nav >> text=Providers")  # a new credential, not the one being edited
    page.select_option("#cred-provider", "openai_compatible")
    page.fill("#cred-name", f"metadata {time.strftime('%H:%M:%S')}")
    page.fill("#cred-url", "http://169.254.169.254/latest")
    page.click("button:has-text('Save credential')")
    expect(page.locator(".messages")).to_contain_text("base_url")
    print("egress: a metadata-address endpoint is refused:", page.locator(".messages").inner_text()[:160])


def check_members_page(page, base: str, out: Path) -> None:
    """Inviting shows a single-use link once; the invitation is pending until accepted."""
    page.click("nav >> text=Members")
    page.fill("input[type=email][name=email]", "newcomer@prbench.local")
    page.click("button:has-text('Send invitation')")
    link = page.locator("input[aria-label='Invitation link']")
    expect(link).to_have_value(re.compile("/orgs/invitations/"))
    expect(page.locator("table", has_text="newcomer@prbench.local")).to_be_visible()
    page.screenshot(path=out / "12-members-invite.png", full_page=True)
    print("members page: invitation pending, its link shown once:", link.input_value()[:48] + "…")


def check_api_pages(page, base: str, out: Path) -> None:
    """An API key made on its page works once, as a Bearer token, until revoked; the audit log
    shows what it did; the webhooks page refuses the metadata address; the API docs render."""
    page.click("nav >> text=API keys")
    name = f"browser-check {time.strftime('%H:%M:%S')}"
    page.fill("input[name=name]", name)
    page.click("button:has-text('Create key')")
    key = page.locator("input[aria-label='The new API key']").input_value()
    assert key.startswith("prb_"), key
    page.screenshot(path=out / "13-api-key.png", full_page=True)
    runs = page.request.get(f"{base}/api/runs?limit=2", headers={"Authorization": f"Bearer {key}"})
    assert runs.status == 200 and len(runs.json()["items"]) == 2, runs.text()
    run_id = runs.json()["items"][0]["id"]
    boards = page.request.get(f"{base}/api/runs/{run_id}/leaderboards", headers={"Authorization": f"Bearer {key}"})
    assert boards.status == 200, boards.text()
    page.goto(f"{base}/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("PRBench API", timeout=30_000)
    page.screenshot(path=out / "14-api-docs.png", full_page=False)
    page.go_back()
    page.locator("tr", has_text=name).locator("button:has-text('Revoke')").click()
    expect(page.locator(".messages")).to_contain_text("revoked")
    gone = page.request.get(f"{base}/api/runs", headers={"Authorization": f"Bearer {key}"})
    assert gone.status == 401, gone.status
    print(f"API keys: {key[:12]}… read {len(runs.json()['items'])} runs and a board, then revoked: 401")
    page.click("nav >> text=Audit log")
    expect(page.locator("table")).to_contain_text("api_key.used")
    expect(page.locator("table")).to_contain_text("api_key.revoked")
    assert key not in page.content()
    page.screenshot(path=out / "15-audit.png", full_page=True)
    print("audit log:", page.locator("tbody tr").count(), "events on its first page, the key in none")
    page.click("nav >> text=Members")
    page.click("main >> text=Webhooks")
    # The demo allows loopback (its self-hosted examples), never the cloud metadata address.
    page.fill("input[name=url]", "http://169.254.169.254/latest/hook")
    page.click("button:has-text('Add webhook')")
    expect(page.locator("p.errorlist")).to_contain_text("169.254.169.254")
    assert "169.254.169.254/latest/hook" not in page.locator("table").first.inner_text()
    page.screenshot(path=out / "16-webhooks.png", full_page=True)
    print("webhooks page: the metadata address is refused:", page.locator("p.errorlist").inner_text()[:120])


if __name__ == "__main__":
    main()
