"""``chainlat check --prometheus``: verdicts from Prometheus's HTTP API, the same queries as
the generated rules (a fake Prometheus answers them here; the integration test runs a real one)."""

from __future__ import annotations

import json
import threading
import tomllib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest

from chainlat._core.errors import TraceSourceError
from chainlat.budgets import Budgets, parse_budgets
from chainlat.cli import main
from chainlat.prometheus import PrometheusReader, judge_prometheus

BUDGETS = Budgets.model_validate(
    {
        "min_runs": 10,
        "workflows": {
            "chat": {"total": "800ms", "p95": {"total": "700ms", "data": "200ms"}},
        },
    }
)
Sample = float | tuple[dict[str, str], float | str]
Answer = Callable[[str], list[Sample]]
SEEN: list[Sample] = [({"gen_ai_workflow_name": "chat"}, 1)]
"""The workflows Prometheus has series of (``group by`` queries)."""


def _vector(values: list[Sample]) -> dict[str, object]:
    samples = [v if isinstance(v, tuple) else ({}, v) for v in values]
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [1, str(v)]} for m, v in samples],
        },
    }


def _answer(over: float, p95_total: float, p95_data: float | None, runs: float) -> Answer:
    """Values by what each query reads (no answer: an empty vector, as for absent series)."""

    def answer(query: str) -> list[Sample]:
        if query.startswith("group by (gen_ai_workflow_name)"):
            return SEEN
        if query.startswith("group by"):
            return []
        if "chainlat_budget_exceeded_total" in query:
            return [over]
        if query.startswith("histogram_quantile") and "traces_span_metrics" in query:
            return [p95_total]
        if query.startswith("histogram_quantile"):
            return [] if p95_data is None else [p95_data]
        return [runs]

    return answer


def _reader(answer: Answer, queries: list[str] | None = None) -> PrometheusReader:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/query"
        query = parse_qs(request.content.decode())["query"][0]
        if queries is not None:
            queries.append(query)
        return httpx.Response(200, json=_vector(answer(query)))

    return PrometheusReader("http://prom.test", transport=httpx.MockTransport(handle))


def test_each_kind_of_limit_is_judged_from_its_query() -> None:
    queries: list[str] = []
    report = judge_prometheus(BUDGETS, _reader(_answer(2, 640.0, 150.0, 40), queries))
    verdicts = {v.target: v for v in report.verdicts}
    assert (verdicts["total"].status, verdicts["total"].broken_runs, verdicts["total"].runs) == (
        "broken",
        2,
        40,
    )
    assert (verdicts["p95.total"].status, verdicts["p95.total"].actual_ms) == ("ok", 640.0)
    assert (verdicts["p95.data"].status, verdicts["p95.data"].actual_ms) == ("ok", 150.0)
    assert len(queries) == 8  # the workflows seen, then a value and a run count per limit
    assert all("[1h]" in q for q in queries)


def test_a_percentile_over_its_limit_is_broken_and_waits_for_min_runs() -> None:
    report = judge_prometheus(BUDGETS, _reader(_answer(0, 720.0, None, 40)))
    verdicts = {v.target: v for v in report.verdicts}
    assert verdicts["p95.total"].status == "broken"
    assert (verdicts["p95.data"].status, verdicts["p95.data"].reason) == ("not_judged", "no_series")
    assert verdicts["total"].status == "ok"
    few = judge_prometheus(BUDGETS, _reader(_answer(0, 720.0, None, 4)))
    few_total = {v.target: v for v in few.verdicts}["p95.total"]
    assert (few_total.status, few_total.reason) == ("not_judged", "not_enough_runs")


STEP_BUDGETS = """
min_runs = 10
[workflows.voice.steps."text_to_speech tts-1"]
p95 = "300ms"
"""


def _step_answer(interrupted: list[Sample]) -> Answer:
    """A voice workflow's step p95 of 250 ms over 40 occurrences; ``interrupted``: the
    answer to the count of its turns ended by barge-in."""

    def answer(query: str) -> list[Sample]:
        if query.startswith("group by (gen_ai_workflow_name)"):
            return [({"gen_ai_workflow_name": "voice"}, 1)]
        if query.startswith("group by"):
            return []
        if 'gen_ai_agent_invocation_end_reason="interrupted"' in query:
            return interrupted
        if query.startswith("histogram_quantile"):
            return [250.0]
        return [40]

    return answer


@pytest.mark.parametrize(
    ("interrupted", "why"),
    [
        ([3], "3 interrupted voice turns of its workflow in Prometheus over the last 1h"),
        ([0.6], "1 interrupted voice turn of its workflow in Prometheus over the last 1h"),
        ([-1], "Prometheus over the last 1h answered -1.0 for its interrupted voice turns"),
        ([float("nan")], "Prometheus over the last 1h answered nan for its interrupted voice"),
    ],
)
def test_a_step_percentile_over_interrupted_turns_is_not_judged(
    interrupted: list[Sample], why: str
) -> None:
    """check leaves the steps of an interrupted voice turn out of a step's percentile; a
    step's series cannot (the end reason is on the turn's span), so over a window with
    such a turn the limit is not judged, and says why; a count that is no count fails
    closed too."""
    budgets = parse_budgets(tomllib.loads(STEP_BUDGETS), source="chainlat.toml")
    queries: list[str] = []
    report = judge_prometheus(budgets, _reader(_step_answer(interrupted), queries))
    (verdict,) = report.verdicts
    assert (verdict.status, verdict.reason, verdict.actual_ms) == (
        "not_judged",
        "not_expressible",
        None,
    )
    assert verdict.why is not None and why in verdict.why
    assert "include_interrupted = true" in verdict.why or "no count" in verdict.why
    assert not any(q.startswith("histogram_quantile") for q in queries)  # not read at all


@pytest.mark.parametrize("interrupted", [[], [0]])
def test_a_step_percentile_without_interrupted_turns_is_judged(
    interrupted: list[Sample],
) -> None:
    """No series of interrupted turns (a workflow that is no voice agent) or none in the
    window: the step's percentile is the budget's, judged."""
    budgets = parse_budgets(tomllib.loads(STEP_BUDGETS), source="chainlat.toml")
    (verdict,) = judge_prometheus(budgets, _reader(_step_answer(interrupted))).verdicts
    assert (verdict.status, verdict.actual_ms, verdict.runs) == ("ok", 250.0, 40)


def test_include_interrupted_judges_a_step_percentile_over_interrupted_turns() -> None:
    """``include_interrupted = true`` counts the interrupted turns, as the step's series
    does: judged, and their count is not asked for."""
    text = STEP_BUDGETS.replace("min_runs = 10", "min_runs = 10\ninclude_interrupted = true")
    budgets = parse_budgets(tomllib.loads(text), source="chainlat.toml")
    queries: list[str] = []
    (verdict,) = judge_prometheus(budgets, _reader(_step_answer([3]), queries)).verdicts
    assert (verdict.status, verdict.actual_ms) == ("ok", 250.0)
    assert not any("interrupted" in q for q in queries)


def test_an_error_answer_names_prometheus() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "error": "parse error"})

    reader = PrometheusReader("http://prom.test", transport=httpx.MockTransport(handle))
    with pytest.raises(
        TraceSourceError, match=r"http://prom.test: /api/v1/query: HTTP 400: parse error"
    ):
        reader.query("up")


class _FakePrometheus(BaseHTTPRequestHandler):
    answer: Answer = staticmethod(_answer(1, 640.0, 150.0, 40))

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        query = parse_qs(self.rfile.read(length).decode())["query"][0]
        body = json.dumps(_vector(type(self).answer(query))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake_prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakePrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_cli_prints_the_verdict_table_and_exits_1_when_broken(
    fake_prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('min_runs = 10\n[workflows.chat]\ntotal = "800ms"\np95 = "700ms"\n')
    code = main(
        ["check", "--prometheus", fake_prometheus, "--window", "30m", "--budgets", str(budgets)]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "the last 30m" in out
    assert "BROKEN: workflows.chat.total\nFAILED: 1 of 2 limits broken, 0 not judged\n" in out


def test_cli_json_and_bad_input(
    fake_prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows.chat]\np95 = "700ms"\n')
    assert (
        main(
            [
                "check",
                "--prometheus",
                fake_prometheus,
                "--budgets",
                str(budgets),
                "--format",
                "json",
            ]
        )
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is True
    assert [v["actual_ms"] for v in document["verdicts"]] == [640.0]
    assert (
        main(["check", "x.jsonl", "--prometheus", fake_prometheus, "--budgets", str(budgets)]) == 2
    )
    assert "give no trace files" in capsys.readouterr().err
    assert (
        main(
            [
                "check",
                "--prometheus",
                fake_prometheus,
                "--window",
                "1 hour",
                "--budgets",
                str(budgets),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "1 hour" in err and len(err.strip().splitlines()) == 1
