"""The run explorer's data: critical-path pieces, model-call parts, attributes shown, the page."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

import chainlat
from chainlat._core.errors import InputError
from chainlat._core.rollup import SpanKindLabel, SpanRecord, compute_rollup
from chainlat._core.runs import TracedSpan, WorkflowRun, build_run
from chainlat._core.stats import aggregate
from chainlat._runtime.otlp_json import encode_request
from chainlat.budgets import parse_budgets
from chainlat.cli import main
from chainlat.report import RunExplorer, html_page, jaeger_ui_url, tradeoff_page
from chainlat.report._critical import critical_path, critical_steps
from chainlat.report._explorer import call_parts
from chainlat.testing import capture
from chainlat.traces import read_runs
from chainlat.traces.sdk import runs_from_spans
from support.sdk_traces import foreign_chat
from support.tracegen import ChatRun, write_runs
from support.voice import voice_turn

KINDS: tuple[SpanKindLabel | None, ...] = (None, "inference", "data", "tool", "workflow")


def _random_tree(rng: random.Random, *, twins: bool) -> tuple[SpanRecord, list[SpanRecord]]:
    root = SpanRecord(1, None, "invoke_workflow w", 0, rng.randint(1, 1000), "workflow")
    records: list[SpanRecord] = []
    used: set[tuple[int, int]] = set()
    for index in range(rng.randint(0, 25)):
        start = rng.randint(-50, 1050)
        end = start + rng.randint(1, 400)
        if (start, end) in used:
            continue  # distinct intervals: ties would make the path depend on input order
        used.add((start, end))
        kind = rng.choice(KINDS)
        source = rng.choice(["chainlat", "gen_ai"]) if twins and kind == "inference" else None
        records.append(
            SpanRecord(
                index + 2,
                rng.choice([1, *[r.span_id for r in records]]),
                f"step-{index}",
                start,
                end,
                kind,
                model="m" if source else None,
                source=source,
                step_name=rng.choice([None, None, f"named-{index}"]),
            )
        )
    return root, records


@pytest.mark.parametrize("twins", [False, True])
def test_critical_pieces_name_the_rollups_path_and_make_its_split(twins: bool) -> None:
    """On random trees (calls seen twice included), the steps the pieces mark are the rollup's
    critical path, and the pieces tile the run and add up to the rollup's split."""
    rng = random.Random(20261203 + twins)
    for _ in range(300):
        root, records = _random_tree(rng, twins=twins)
        rollup = compute_rollup(root, records)
        path = critical_path(root, records)
        assert tuple(path.names[s] for s in path.steps) == rollup.critical_path
        ends = [root.start_ns] + [p.end_ns for p in path.pieces]
        assert [p.start_ns for p in path.pieces] == ends[:-1]  # back to back
        assert ends[-1] == root.end_ns
        for kind in ("inference", "data", "tool", "overhead"):
            spent = sum(p.end_ns - p.start_ns for p in path.pieces if p.kind == kind)
            assert spent / 1e6 == pytest.approx(rollup.kind_ms(kind), abs=1e-9)


@pytest.mark.parametrize("twins", [False, True])
def test_pieces_to_the_first_output_make_the_rollups_first_output_split(twins: bool) -> None:
    """On random trees, the path to the first output is the rollup's own: back to back from
    the run's start to the first output, adding up to its split by kind."""
    rng = random.Random(20261206 + twins)
    drawn = 0
    for _ in range(300):
        root, records = _random_tree(rng, twins=twins)
        rollup = compute_rollup(root, records)
        path = critical_path(root, records)
        if rollup.first_output_ms is None:
            assert path.to_output == () and path.output_steps == ()
            continue
        drawn += 1
        pieces = [p for p in path.to_output if p.end_ns > p.start_ns]
        ends = [root.start_ns] + [p.end_ns for p in pieces]
        assert [p.start_ns for p in pieces] == ends[:-1]
        assert (ends[-1] - root.start_ns) / 1e6 == pytest.approx(rollup.first_output_ms, abs=1e-9)
        split = rollup.first_output_split()
        assert split is not None
        for kind in ("inference", "data", "tool", "overhead"):
            spent = sum(p.end_ns - p.start_ns for p in pieces if p.kind == kind)
            assert spent / 1e6 == pytest.approx(split[kind], abs=1e-9)
        assert set(path.output_steps) <= set(path.names)
    assert drawn > 100  # most random trees have a model call


def test_the_explorer_draws_a_voice_turns_path_to_its_first_audio() -> None:
    """The voice turn of tests/support/voice.py: its first audio at 520 ms comes through speech
    to text, the retrieval, the model's first sentence and the first sentence's speech; the
    second sentence's speech, on the whole turn's path, is not on it."""
    with capture(fake_clock=True, sequential_ids=True) as cap:
        voice_turn(cap)
        (run,) = runs_from_spans(cap.spans())
    document = _document(RunExplorer(), [run])
    tree = document["trees"][0]
    assert tree["fo"] == 520.0
    names = [document["strings"][row[0]] for row in tree["s"]]
    steps = ["speech_to_text stt-1", "data kb", "answer", "text_to_speech tts-1"]
    assert _strings(document, [name for _, name in tree["o"]]) == steps
    assert tree["o"][-1][0] < tree["p"][-1][0]  # the first sentence's speech, not the second's
    by_row: dict[str, float] = {}
    for row, start, end in tree["q"]:
        by_row[names[row]] = by_row.get(names[row], 0.0) + end - start
    assert by_row == {
        "invoke_workflow voice-turn": 20.0,  # the turn opened 20 ms after the caller stopped
        "speech_to_text stt-1": 120.0,
        "data kb": 40.0,
        "answer": 220.0,
        "text_to_speech tts-1": 120.0,
    }
    assert tree["q"][-1][2] == tree["fo"]
    flagged = [names[j] for j, row in enumerate(tree["s"]) if row[9] & 8]
    assert flagged == steps
    second = [j for j, name in enumerate(names) if name == "text_to_speech tts-1"][1]
    assert tree["s"][second][9] & 2 and not tree["s"][second][9] & 8  # whole turn's path only


def test_a_run_without_a_first_output_has_no_path_to_it() -> None:
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100_000_000, "workflow")
    run = build_run("w", root, [SpanRecord(2, 1, "data d", 0, 50_000_000, "data")])
    tree = _document(RunExplorer(), [run])["trees"][0]
    assert "fo" not in tree and "q" not in tree and "o" not in tree


def test_critical_steps_of_a_run_without_spans_follow_the_names_to_the_later_call() -> None:
    """A run judged live has no spans: of two parallel calls of one name, the one that
    ended last is on the path, as the rollup's walk takes it."""
    root = SpanRecord(1, None, "invoke_workflow w", 0, 500_000_000, "workflow")
    spans = [
        SpanRecord(2, 1, "chat m", 10_000_000, 300_000_000, "inference"),
        SpanRecord(3, 1, "chat m", 20_000_000, 450_000_000, "inference"),
        SpanRecord(4, 1, "tool t", 450_000_000, 490_000_000, "tool"),
    ]
    run = build_run("w", root, spans)
    assert run.rollup.critical_path == ("chat m", "tool t")
    assert critical_steps(run) == {1, 2}
    document = _document(RunExplorer(), [run])
    path = document["trees"][0]["p"]
    assert [row for row, _ in path] == [2, 3]  # rows: the workflow, then the steps
    assert _strings(document, [name for _, name in path]) == ["chat m", "tool t"]


def test_parts_of_a_streamed_call_split_its_duration_exactly() -> None:
    attributes = {
        "chainlat.latency.queue_ms": 1.0,
        "chainlat.latency.connect_ms": 2.0,
        "chainlat.latency.send_ms": 0.5,
        "chainlat.latency.wait_ms": 100.0,
        "chainlat.latency.receive_ms": 80.0,
        "chainlat.latency.server_ms": 90.0,
        "chainlat.latency.ttft_ms": 123.5,
        "chainlat.latency.generation_ms": 40.0,
    }
    parts = call_parts(attributes, 183.5, 123.5)
    assert parts == [
        ("queue", 1.0),
        ("connect", 2.0),
        ("send", 0.5),
        ("server", 90.0),
        ("network", 10.0),
        ("first token", 20.0),
        ("generation", 40.0),
        ("receive", 20.0),
    ]
    assert sum(ms for _, ms in parts) == 183.5


def test_parts_without_server_time_show_the_wait_and_a_server_never_exceeds_it() -> None:
    base = {
        "chainlat.latency.queue_ms": 0.0,
        "chainlat.latency.connect_ms": 0.0,
        "chainlat.latency.send_ms": 1.0,
        "chainlat.latency.wait_ms": 50.0,
        "chainlat.latency.receive_ms": 9.0,
    }
    assert call_parts(base, 60.0, None) == [
        ("queue", 0.0), ("connect", 0.0), ("send", 1.0), ("wait", 50.0), ("receive", 9.0)
    ]  # fmt: skip
    over = call_parts({**base, "chainlat.latency.server_ms": 51.0}, 60.0, None)
    assert ("server", 50.0) in over and ("network", 0.0) in over
    assert sum(ms for _, ms in over) == 60.0


def test_a_call_timed_by_hand_splits_at_its_first_token_and_others_not_at_all() -> None:
    assert call_parts({}, 300.0, 80.0) == [("first token", 80.0), ("generation", 220.0)]
    assert call_parts({}, 300.0, None) == []
    assert call_parts({"chainlat.latency.queue_ms": "1"}, 300.0, None) == []


def _document(explorer: RunExplorer, runs: list[WorkflowRun]) -> Any:
    for run in runs:
        explorer.add(run)
    page = explorer.html()
    found = re.search(r'<script type="application/json" id="chainlat-runs">(.*?)</script>', page)
    assert found is not None
    return json.loads(found[1])


def _strings(document: Any, values: list[int]) -> list[str]:
    return [document["strings"][v] for v in values]


def test_a_run_whose_cost_cannot_be_judged_is_marked_not_judged_not_kept(tmp_path: Path) -> None:
    """The page's budget column takes the verdict's status: a run that broke nothing but
    whose cost has no price is "not judged" (-1), never "kept" (0)."""
    path = write_runs(tmp_path / "t.jsonl", [ChatRun(chat_ms=300), ChatRun(chat_ms=300)])
    runs = list(read_runs([path]))
    kept = parse_budgets({"workflows": {"support-chat": {"total": "10s"}}})
    assert _document(RunExplorer(budgets=kept), runs)["runs"]["verdict"] == [0, 0]
    costly = parse_budgets({"workflows": {"support-chat": {"total": "10s", "cost": "0.01"}}})
    assert _document(RunExplorer(budgets=costly), runs)["runs"]["verdict"] == [-1, -1]


def test_a_traced_run_becomes_rows_with_exact_times_parts_and_marks(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "t.jsonl", [ChatRun(retrieve_ms=100, ttft_ms=80, chat_ms=300)])
    (run,) = read_runs([path])
    budgets = parse_budgets(
        {"workflows": {"support-chat": {"total": "400ms", "steps": {"chat gpt-4o": {"max": 250}}}}}
    )
    document = _document(RunExplorer(budgets=budgets, jaeger_ui="http://j:16686"), [run])
    runs = document["runs"]
    assert runs["total"] == [410.0] and runs["verdict"] == [2]
    assert runs["fo"] == [190.0]  # the call's first token: 10 + 100 + 80 ms
    assert runs["trace"] == [run.trace_id] and _strings(document, runs["var"]) == ["(none)"]
    (tree,) = document["trees"]
    rows = tree["s"]
    assert _strings(document, [r[0] for r in rows]) == [
        "invoke_workflow support-chat", "data retrieve-docs", "chat gpt-4o"
    ]  # fmt: skip
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
        (0, -1, 0.0, 410.0), (2, 0, 10.0, 100.0), (1, 0, 110.0, 300.0)
    ]  # fmt: skip
    assert [r[6] for r in rows] == [[[0.0, 10.0]], [[10.0, 110.0]], [[110.0, 410.0]]]
    assert [r[9] & 2 for r in rows] == [0, 2, 2]  # the steps on the path
    assert [row for row, _ in tree["p"]] == [1, 2]
    labels = [(document["strings"][label], ms) for label, ms in rows[2][7]]
    assert labels == [("first token", 80.0), ("generation", 220.0)]
    assert rows[2][8] == 80.0
    assert sorted(tree["v"]) == [
        [0, "support-chat: total 410.0 ms > limit 400 ms"],
        [2, 'support-chat: steps."chat gpt-4o".max 300.0 ms > limit 250 ms'],
    ]
    assert document["jaeger"] == "http://j:16686"


def test_a_first_output_on_the_workflow_span_is_shown(tmp_path: Path) -> None:
    with capture(fake_clock=True) as cap:
        with chainlat.workflow("chat", tracer_provider=cap.provider) as handle:
            cap.clock.advance(ms=15.5)
            handle.first_output()
            cap.clock.advance(ms=4.5)
        path = tmp_path / "t.jsonl"
        path.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    (run,) = read_runs([path])
    document = _document(RunExplorer(), [run])
    assert document["runs"]["fo"] == [15.5]
    assert document["trees"][0]["fo"] == 15.5


def test_a_first_output_that_is_a_bound_is_marked_for_the_page(tmp_path: Path) -> None:
    """A GenAI chat span that says nothing of streaming answers last (rule 17 of
    docs/attributes.md): the run's first output is its start, a bound, and the page's data
    says so (``fb``) beside the run's and the tree's; a measured one carries no mark."""
    with capture(fake_clock=True) as cap:
        with chainlat.workflow("chat", tracer_provider=cap.provider):
            foreign_chat(cap, after_ms=10, took_ms=40)
        with chainlat.workflow("chat", tracer_provider=cap.provider) as handle:
            cap.clock.advance(ms=15.5)
            handle.first_output()
        path = tmp_path / "t.jsonl"
        path.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    runs = list(read_runs([path]))
    document = _document(RunExplorer(), runs)
    assert document["runs"]["fo"] == [10.0, 15.5]
    assert document["runs"]["fb"] == [1, 0]
    assert [tree.get("fb") for tree in document["trees"]] == [1, None]


def test_names_from_traces_cannot_end_the_script_element(tmp_path: Path) -> None:
    hostile = "</script><script>alert(1)</script><!--"
    root = TracedSpan(SpanRecord(1, None, hostile, 0, 10_000_000, "workflow"), {})
    step = TracedSpan(SpanRecord(2, 1, hostile, 0, 5_000_000, "tool"), {"note": hostile})
    run = WorkflowRun.from_spans(hostile, root, [step], trace_id="ab" * 16)
    explorer = RunExplorer()
    explorer.add(run)
    page = explorer.html()
    data = page.split('id="chainlat-runs">')[1].split("</script>")[0]
    assert "<" not in data
    document = _document(RunExplorer(), [run])
    assert hostile in document["strings"]


def _variants_file(path: Path) -> Path:
    with capture(fake_clock=True) as cap:
        for i in range(6):
            variant = "large" if i % 2 else "small"
            with chainlat.workflow("agent", variant=variant, tracer_provider=cap.provider):
                with chainlat.inference(variant, tracer_provider=cap.provider):
                    cap.clock.advance(ms=100 if i % 2 else 10)
        path.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    return path


def test_charts_draw_one_series_per_variant_when_runs_have_several(tmp_path: Path) -> None:
    path = _variants_file(tmp_path / "v.jsonl")
    explorer = RunExplorer()
    stats = aggregate(explorer.watch(read_runs([path])))
    assert explorer.variants == ["small", "large"]
    page = html_page(stats, explorer=explorer)
    names = re.findall(r'"name":"(agent[^"]*)"', page)
    assert set(names) == {"agent · small", "agent · large"}
    assert "(all 2 variants together)" in page
    assert set(re.findall(r'"name":"(agent[^"]*)"', html_page(stats))) == {"agent"}


def test_report_and_compare_write_the_explorer_and_reject_a_bad_jaeger_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _variants_file(tmp_path / "v.jsonl")
    page = tmp_path / "r.html"
    args = ["--html", str(page), "--jaeger-ui", "http://127.0.0.1:16686/"]
    assert main(["report", str(path), *args, "--format", "json"]) == 0
    assert 'id="chainlat-runs"' in page.read_text()
    assert '"jaeger":"http://127.0.0.1:16686"' in page.read_text()
    assert main(["compare", str(path), *args, "--format", "json"]) == 0
    text = page.read_text()
    assert text.count('"trace":[') == 1 and '"total":[' in text
    capsys.readouterr()
    assert main(["report", str(path), "--html", str(page), "--jaeger-ui", "ftp://x"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("chainlat: --jaeger-ui 'ftp://x': expected a URL") and err.count("\n") == 1
    )
    assert main(["report", str(path), "--jaeger-ui", "http://127.0.0.1:16686"]) == 2
    assert capsys.readouterr().err == (
        "chainlat: --budgets and --jaeger-ui mark the runs of the HTML page: add --html\n"
    )


def test_jaeger_ui_url_keeps_a_path_prefix_and_drops_the_trailing_slash() -> None:
    assert jaeger_ui_url(" https://ops.example.com/jaeger/ ") == "https://ops.example.com/jaeger"
    with pytest.raises(InputError):
        jaeger_ui_url("localhost:16686")


def test_the_compare_page_embeds_the_explorer_when_given(tmp_path: Path) -> None:
    from chainlat.analysis.tradeoff import compare

    path = _variants_file(tmp_path / "v.jsonl")
    explorer = RunExplorer()
    for run in read_runs([path]):
        explorer.add(run)
    page = tradeoff_page(compare([path]), explorer=explorer)
    assert 'id="explorer"' in page and explorer.runs == 6
    assert 'id="explorer"' not in tradeoff_page(compare([path]))


def test_attributes_that_could_hold_a_credential_are_never_shown() -> None:
    secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"
    attributes = {
        "http.request.header.authorization": f"Bearer {secret}",
        "http.request.header.x-api-key": secret,
        "llm.api_key": secret,
        "url.full": f"https://api.example.com/v1?key={secret}",
        "error.message": f"bad token {secret}",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 12,
        "chainlat.cache.hit": True,
        "note": "x" * 5000,
    }
    root = TracedSpan(SpanRecord(1, None, "invoke_workflow w", 0, 10_000_000, "workflow"), {})
    steps = [
        TracedSpan(SpanRecord(i, 1, "chat m", 0, 5_000_000, "inference"), attributes)
        for i in (2, 3)
    ]
    explorer = RunExplorer()
    explorer.add(WorkflowRun.from_spans("w", root, steps, trace_id="ab" * 16))
    page = explorer.html()
    assert secret not in page
    document = _document(RunExplorer(), [WorkflowRun.from_spans("w", root, steps)])
    rows = document["trees"][0]["s"]
    assert rows[1][5] == rows[2][5]  # the same pairs, kept once
    shown = {document["strings"][k]: v for k, v in (document["pairs"][i] for i in rows[1][5])}
    assert set(shown) == {"url.full", "error.message", "gen_ai.request.model",
                          "gen_ai.usage.input_tokens", "chainlat.cache.hit", "note"}  # fmt: skip
    assert shown["gen_ai.usage.input_tokens"] == 12 and shown["chainlat.cache.hit"] is True
    assert shown["note"] == "x" * 1000 + "... (4000 more chars)"


def test_malformed_trees_and_odd_values_still_make_a_valid_page() -> None:
    """Cycles, duplicate ids, negative durations, NaN and infinite numbers, huge integers,
    lists and control characters: the page is still made, and its data is strict JSON."""
    rng = random.Random(7)
    odd: list[object] = [
        float("nan"), float("inf"), -float("inf"), 2**80, -1, True, "tab\there\x1b", "\ud800",
        ["a", "b"], [1.5, float("nan")], "", 0.1,
    ]  # fmt: skip
    explorer = RunExplorer()
    for _ in range(200):
        spans = []
        for index in range(rng.randint(0, 12)):
            start = rng.randint(-50, 1050)
            record = SpanRecord(
                rng.randint(1, index + 2),
                rng.choice([None, 1, rng.randint(1, 20)]),
                rng.choice(["chat m", "data d", "\x00weird"]),
                start,
                start + rng.randint(-100, 400),
                rng.choice(KINDS),
                ttft_ms=rng.choice([None, 5.0]),
            )
            attributes = {f"k{j}": rng.choice(odd) for j in range(rng.randint(0, 4))}
            attributes["chainlat.latency.queue_ms"] = rng.choice(odd)
            spans.append(TracedSpan(record, attributes, error=rng.random() < 0.2))
        root = TracedSpan(
            SpanRecord(1, None, "invoke_workflow w", 0, rng.randint(-10, 1000), "workflow"),
            {"chainlat.chain.first_output_ms": rng.choice(odd)},
        )
        explorer.add(WorkflowRun.from_spans("w", root, spans, trace_id="cd" * 16))
    page = explorer.html()
    data = page.split('id="chainlat-runs">')[1].split("</script>")[0]
    document = json.loads(data, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert len(document["trees"]) == 200


def test_a_call_seen_twice_shows_its_whole_time_on_the_critical_path() -> None:
    """A hand-written user-facing call (249.9 ms) with its HTTP-level span inside: the path
    runs through the wire span, and the explorer showed the call "on the critical path
    4.3 ms" (its time outside the wire span). The call is one step: 249.9 ms."""
    with capture(fake_clock=True) as cap:
        p, clock = cap.provider, cap.clock
        with chainlat.workflow("chat", tracer_provider=p):
            clock.advance(5)
            with chainlat.inference("m", user_facing=True, tracer_provider=p):
                start = clock.advance(2)
                wire = p.get_tracer("chainlat").start_span(
                    "POST m",
                    attributes={"chainlat.step.kind": "inference", "gen_ai.request.model": "m",
                                "http.request.method": "POST"},
                    start_time=start,
                )  # fmt: skip
                wire.end(end_time=clock.advance(245.6))
                clock.advance(2.3)
            clock.advance(5)
        [run] = runs_from_spans(cap.spans())
    document = _document(RunExplorer(), [run])
    rows = document["trees"][0]["s"]
    on_path = {
        document["strings"][row[0]]: round(sum(b - a for a, b in row[6] or []), 3) for row in rows
    }
    assert on_path == {"invoke_workflow chat": 10.0, "chat m": 249.9, "POST m": 0.0}
