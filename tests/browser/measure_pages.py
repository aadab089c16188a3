"""Page sizes and timings of ``chainlat report --html`` with the run explorer, for docs/report.md.

Not a test: it measures. Run from the repository root:

    .venv/bin/python tests/browser/measure_pages.py 1000 10000

For each count, writes that many runs of the ``support-chat`` profile (tests/support/tracegen.py,
four spans a run), renders the page, and reports its size, the part of it that is the
explorer's data, the CPU time the command took, and in Chromium the time from navigation to
the first waterfall drawn and to draw another run.
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from support.tracegen import Profile, write_profile


def measure(runs: int, workdir: Path) -> dict[str, float]:
    traces = write_profile(workdir / f"runs-{runs}.jsonl", Profile(), runs=runs, seed=11)
    page = workdir / f"report-{runs}.html"
    command_s = _cpu_s(["report", str(traces), "--html", str(page), "--format", "json"])
    plain_s = _cpu_s(["report", str(traces), "--format", "json"])
    text = page.read_text(encoding="utf-8")
    data = re.search(r'id="chainlat-runs">(.*?)</script>', text, re.DOTALL)
    assert data is not None
    found = {
        "runs": runs,
        "page_mb": len(text.encode()) / 1e6,
        "data_mb": len(data[1].encode()) / 1e6,
        "command_s": command_s,
        "plain_s": plain_s,
    }
    found.update(_in_browser(page))
    return found


def _cpu_s(arguments: list[str]) -> float:
    """CPU seconds (user + system) of one ``chainlat`` command: on a shared machine, wall
    time measures the neighbours."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "chainlat.cli", *arguments], check=True, stdout=subprocess.DEVNULL
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _in_browser(page: Path) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        return {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        started = time.perf_counter()
        tab.goto(page.as_uri())
        tab.wait_for_selector("#cl-waterfall .cl-row[data-span]")
        loaded_s = time.perf_counter() - started
        ready_s = tab.evaluate(
            "performance.getEntriesByName('chainlat-explorer-ready')[0].startTime / 1000"
        )
        started = time.perf_counter()
        tab.click("button[data-pick=p95]")
        tab.wait_for_selector("#cl-run h3:text-matches('^p95')")
        pick_s = time.perf_counter() - started
        rows = tab.locator("#cl-runs tbody tr[data-run]").count()
        browser.close()
    return {"open_s": loaded_s, "ready_s": ready_s, "pick_s": pick_s, "table_rows": rows}


def main(counts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        for runs in counts:
            m = measure(runs, Path(workdir))
            nan = float("nan")
            print(
                f"{runs:>6} runs: page {m['page_mb']:.1f} MB (explorer data {m['data_mb']:.2f} MB)"
                f"; report --html {m['command_s']:.1f} s CPU (without --html"
                f" {m['plain_s']:.1f} s)"
                f"; explorer drawn {m.get('ready_s', nan):.2f} s after navigation"
                f" (page loaded {m.get('open_s', nan):.1f} s); another run drawn in"
                f" {m.get('pick_s', nan):.2f} s; table rows in the DOM {m.get('table_rows', 0):.0f}"
            )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 10000])
