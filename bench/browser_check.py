"""Drive the running demo in headless Chromium: log in, start a run, watch htmx progress.

    .venv/bin/python bench/browser_check.py [--base http://127.0.0.1:8000] [--out var/screens]

Needs Debian's chromium (/usr/bin/chromium). Prints what it checked and saves screenshots.
"""

from __future__ import annotations

import argparse
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

        page.click("text=Demo: three mock arms")
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
        expect(page.locator("h2", has_text="Patch")).to_be_visible()
        page.screenshot(path=out / "5-attempt.png", full_page=True)
        print("attempt page:", page.locator("h1").inner_text())

        page.go_back()
        page.goto(f"{args.base}/experiments/")
        page.click("text=Demo: three mock arms")
        page.click("text=Edit")
        page.screenshot(path=out / "6-edit.png", full_page=True)
        page.click("button:has-text('Save experiment')")
        expect(page.locator(".messages")).to_contain_text("Saved")
        print("edit form saves unchanged, as a browser submits it")

        check_boards(page, args.base, out)
        check_question_run(page, args.base, out)
        check_repository_pages(page, args.base, out)
        check_evaluator_admin(page, args.base, out)
        check_providers_page(page, out)
        check_members_page(page, args.base, out)
        check_api_pages(page, args.base, out)
        assert not refused, f"the CSP refused: {refused}"
        print("no page broke the Content-Security-Policy")
        browser.close()


def check_boards(page, base: str, out: Path) -> None:
    """The demo run's boards: a column sorts through htmx (the URL follows), the charts are
    drawn, and the pairwise page states its verdicts in words beside its heatmap."""
    page.goto(f"{base}/experiments/")
    page.click("text=Demo: three mock arms")
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
