"""Drive the running demo in headless Chromium: log in, start a run, watch htmx progress.

    .venv/bin/python bench/browser_check.py [--base http://127.0.0.1:8000] [--out var/screens]

Needs Debian's chromium (/usr/bin/chromium). Prints what it checked and saves screenshots.
"""

from __future__ import annotations

import argparse
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
        expect(page.locator("#live .status")).to_be_visible()
        first = page.locator("#live .runbar").inner_text()
        page.screenshot(path=out / "3-run-live.png", full_page=True)
        started = time.monotonic()
        expect(page.locator("#live .status")).to_have_text("completed", timeout=120_000)
        print(f"run page went from {first!r} to completed by htmx polling in {time.monotonic() - started:.1f}s")
        assert "hx-trigger" not in (page.locator("#live").get_attribute("hx-trigger") or ""), "polling should stop"
        page.reload()
        page.screenshot(path=out / "4-run-done.png", full_page=True)

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
        browser.close()


if __name__ == "__main__":
    main()
