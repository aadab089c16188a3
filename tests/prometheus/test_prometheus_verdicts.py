"""``chainlat check --prometheus`` judges as the trace source does: a workflow Prometheus has
no series of, a limit metrics cannot express, a value that is not finite and a query with
no series are not judged (exit 2, unless opted out); every series is judged, worst first.

A fake Prometheus on 127.0.0.1 answers each query by what it reads."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from chainlat.cli import main

Series = list[tuple[dict[str, str], str]]


@dataclass
class Answers:
    """What the fake Prometheus holds: workflows with series, and the value of each kind of
    query for them."""

    seen: list[str] = field(default_factory=lambda: ["chat"])
    per_run: Series = field(default_factory=lambda: [({}, "0")])
    p95_total: Series = field(default_factory=lambda: [({}, "640")])
    p95_split: Series = field(default_factory=lambda: [({}, "150")])
    runs: Series = field(default_factory=lambda: [({}, "40")])

    def __call__(self, query: str) -> Series:
        if query.startswith("group by (gen_ai_workflow_name)"):
            return [({"gen_ai_workflow_name": w}, "1") for w in self.seen]
        if query.startswith("group by"):
            return []
        if any(f'"{w}"' in query for w in ("helpdsk", "helpdesk") if w not in self.seen):
            return []
        if "chainlat_budget_exceeded_total" in query:
            return self.per_run
        if query.startswith("histogram_quantile") and "traces_span_metrics" in query:
            return self.p95_total
        if query.startswith("histogram_quantile"):
            return self.p95_split
        return self.runs


class _Handler(BaseHTTPRequestHandler):
    answers = Answers()

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        query = parse_qs(self.rfile.read(length).decode())["query"][0]
        result = [{"metric": m, "value": [1, v]} for m, v in type(self).answers(query)]
        body = json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[Answers]:
    answers = Answers()
    handler = type("Handler", (_Handler,), {"answers": answers})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    answers.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield answers
    finally:
        server.shutdown()
        server.server_close()


def _check(
    prometheus: Answers,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    budget: str,
    *options: str,
) -> tuple[int, dict[str, Any], str]:
    path = tmp_path / "chainlat.toml"
    path.write_text(budget, encoding="utf-8")
    url: str = prometheus.url  # type: ignore[attr-defined]
    code = main(
        ["check", "--prometheus", url, "--budgets", str(path), "--format", "json", *options]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _verdicts(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(v["workflow"], v["target"]): v for v in document["verdicts"]}


CHAT = '[workflows.chat]\ntotal = "800ms"\np95 = "700ms"\n'


def test_a_misspelled_workflow_is_not_judged_and_fails_the_gate(
    prometheus: Answers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prometheus.seen = ["chat", "helpdesk"]
    budget = CHAT + '[workflows.helpdsk]\ntotal = "800ms"\n'
    code, document, err = _check(prometheus, tmp_path, capsys, budget)
    assert code == 2
    verdict = _verdicts(document)[("helpdsk", "total")]
    assert (verdict["status"], verdict["reason"]) == ("not_judged", "unknown_workflow")
    assert "did you mean 'helpdesk'?" in verdict["why"]
    assert document["exit_code"] == 2 and not document["ok"]
    assert "helpdsk" in err
    code, document, _ = _check(prometheus, tmp_path, capsys, budget, "--allow-missing")
    assert code == 0
    assert _verdicts(document)[("helpdsk", "total")]["allowed"] is True


@pytest.mark.parametrize(
    ("budget", "target"),
    [
        (CHAT + 'cost_p95 = "0.01"\n', "cost_p95"),
        (CHAT + '[workflows.chat.steps."chat gpt-4o"]\nttft_p95 = "300ms"\n', "ttft_p95"),
        ("exclude_cache_hits = true\n" + CHAT, "p95.total"),
    ],
)
def test_a_limit_prometheus_cannot_express_is_not_judged_with_its_reason(
    budget: str,
    target: str,
    prometheus: Answers,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document, _ = _check(prometheus, tmp_path, capsys, budget)
    assert code == 2
    found = [v for v in document["verdicts"] if v["target"].endswith(target)]
    assert [(v["status"], v["reason"]) for v in found] == [("not_judged", "not_expressible")]
    assert "chainlat check" in found[0]["why"] and "--allow-unjudged" in found[0]["why"]
    code, document, _ = _check(prometheus, tmp_path, capsys, budget, "--allow-unjudged")
    assert code == 0


@pytest.mark.parametrize("value", ["-Inf", "+Inf", "NaN"])
def test_a_value_that_is_not_finite_is_not_judged(
    value: str, prometheus: Answers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prometheus.p95_total = [({}, value)]
    code, document, _ = _check(prometheus, tmp_path, capsys, CHAT)
    assert code == 2
    verdict = _verdicts(document)[("chat", "p95.total")]
    assert (verdict["status"], verdict["reason"]) == ("not_judged", "not_finite")


def test_every_series_is_judged_worst_first(
    prometheus: Answers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two series answer the p95 (two instances): the one over 700 ms breaks the limit."""
    prometheus.p95_total = [({"instance": "a"}, "640"), ({"instance": "b"}, "900")]
    code, document, _ = _check(prometheus, tmp_path, capsys, CHAT)
    assert code == 1
    p95 = [v for v in document["verdicts"] if v["target"].startswith("p95.total")]
    assert [(v["target"], v["status"], v["actual_ms"]) for v in p95] == [
        ('p95.total {instance="b"}', "broken", 900.0),
        ('p95.total {instance="a"}', "ok", 640.0),
    ]


def test_no_series_is_not_judged(
    prometheus: Answers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs were counted but the application counts no run over ``total``: not judged."""
    prometheus.per_run = []
    code, document, _ = _check(prometheus, tmp_path, capsys, CHAT)
    assert code == 2
    verdict = _verdicts(document)[("chat", "total")]
    assert (verdict["status"], verdict["reason"]) == ("not_judged", "no_series")
    assert "configure(budgets=...)" in verdict["why"]


def test_the_text_output_says_what_was_not_judged(
    prometheus: Answers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chainlat.toml"
    path.write_text(CHAT + 'cost_p95 = "0.01"\n', encoding="utf-8")
    url: str = prometheus.url  # type: ignore[attr-defined]
    assert main(["check", "--prometheus", url, "--budgets", str(path)]) == 2
    out = capsys.readouterr().out
    assert "cost_p95" in out
    assert "OK" not in out.splitlines()[-1]


@pytest.mark.parametrize("output", ["text", "json", "markdown"])
def test_credentials_in_the_prometheus_url_are_never_printed(
    output: str, prometheus: Answers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chainlat.toml"
    path.write_text(CHAT, encoding="utf-8")
    url: str = prometheus.url  # type: ignore[attr-defined]
    secret_url = url.replace("http://", "http://admin:PASSWORD@") + "/?token=TOKEN123"
    main(["check", "--prometheus", secret_url, "--budgets", str(path), "--format", output])
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "PASSWORD" not in printed
    assert "TOKEN123" not in printed
    assert "Prometheus http://admin:[REDACTED]@127.0.0.1" in printed


def test_a_negative_count_is_not_judged_and_never_shown_as_runs(
    prometheus: Answers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prometheus.per_run = [({}, "-1")]
    prometheus.runs = [({}, "-1")]
    path = tmp_path / "chainlat.toml"
    path.write_text(CHAT, encoding="utf-8")
    url: str = prometheus.url  # type: ignore[attr-defined]
    assert main(["check", "--prometheus", url, "--budgets", str(path)]) == 2
    assert "-1/-1" not in capsys.readouterr().out
    code, document, _ = _check(prometheus, tmp_path, capsys, CHAT)
    assert code == 2
    verdict = _verdicts(document)[("chat", "total")]
    assert (verdict["status"], verdict["reason"], verdict["runs"]) == (
        "not_judged",
        "impossible_value",
        0,
    )
