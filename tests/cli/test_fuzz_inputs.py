"""Bad input to ``chainlat check``: one clear line on stderr, exit code 2, never a traceback.

Budget files mutated at random (seeded, a few hundred), trace files that are
corrupt, truncated, empty, binary, wrong-typed or one 100 MB line, and Jaeger
URLs that refuse, hang or answer HTML. Everything listens on 127.0.0.1 and every
wait is bounded.
"""

from __future__ import annotations

import copy
import json
import random
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import chainlat
from chainlat import traces
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import capture

VALID_TOML = """\
min_runs = 2
exclude_cache_hits = false

[workflows.answer]
total = "2s"
inference = "1500ms"
p95 = { total = "1800ms", data = "250ms" }
p50 = "900ms"

[workflows.answer.steps."chat gpt-4o"]
max = "1s"
p95 = "800ms"
ttft = 300
ttft_p95 = "0.25s"

[workflows.answer.steps."data retrieve-docs"]
max = "250000us"
"""

VALID_YAML = """\
min_runs: 2
workflows:
  answer:
    total: 2s
    p95: {total: 1800ms, data: 250ms}
    steps:
      "chat gpt-4o": {max: 1s, ttft_p95: 0.25s}
"""

TOKENS = [
    "-1", "0", "1e309", "nan", "inf", '"800ms"', '"-5ms"', '"fast"', "true", "[]", "{}",
    '""', "null", "~", "'", '"', "[", "]", "{", "}", "=", ":", "-", "\\", "\x00", "\t",
    "\u2028", "é", "\udcff", "💥", "workflows", "steps", "p95", "p100", "total", "max",
    "min_runs", "<<", "&anchor", "*anchor", "!!python/object:os.system", "0x10", "1_000",
    "9" * 400,
]  # fmt: skip


def mutate(text: str, rng: random.Random) -> bytes:
    """One to three random edits: delete, insert, replace a token, duplicate, swap, cut."""
    for _ in range(rng.randint(1, 3)):
        lines = text.split("\n")
        op = rng.randrange(6)
        if op == 0 and text:
            start = rng.randrange(len(text))
            text = text[:start] + text[start + rng.randint(1, 12) :]
        elif op == 1:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(TOKENS) + text[at:]
        elif op == 2:
            words = text.split(" ")
            words[rng.randrange(len(words))] = rng.choice(TOKENS)
            text = " ".join(words)
        elif op == 3:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif op == 4 and len(lines) > 1:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        else:
            text = text[: rng.randrange(len(text) + 1)]
    raw = text.encode("utf-8", "surrogateescape" if rng.random() < 0.5 else "replace")
    if rng.random() < 0.05:
        raw += bytes(rng.randrange(256) for _ in range(8))  # not UTF-8 at all
    return raw


def workflow_request(runs: int = 3) -> dict[str, Any]:
    """Runs of the ``answer`` workflow through the real pipeline, as one OTLP/JSON request."""
    with capture(fake_clock=True) as cap:
        p = cap.provider
        for _ in range(runs):
            with chainlat.workflow("answer", tracer_provider=p):
                with chainlat.data_stage("retrieve-docs", tracer_provider=p):
                    cap.clock.advance(ms=40)
                with chainlat.inference("gpt-4o", tracer_provider=p) as call:
                    cap.clock.advance(ms=120)
                    call.first_token()
                    cap.clock.advance(ms=200)
                cap.clock.advance(ms=5)
        return encode_request(cap.spans())


@pytest.fixture
def good_traces(tmp_path: Path) -> Path:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(workflow_request()) + "\n")
    return path


@pytest.fixture
def budgets(tmp_path: Path) -> Path:
    path = tmp_path / "chainlat.toml"
    path.write_text(VALID_TOML)
    return path


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_clear_line(code: int, err: str, *, mentions: str = "") -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[:2000]
    (line,) = lines
    assert line.startswith("chainlat: "), line
    assert len(line) < 1000, f"{len(line)} characters"
    assert "Traceback" not in err
    assert mentions in line
    return line


# -- budget files ------------------------------------------------------------------------------


def test_the_unmutated_budget_files_are_valid(
    capsys: pytest.CaptureFixture[str], good_traces: Path, tmp_path: Path
) -> None:
    for name, text in (("chainlat.toml", VALID_TOML), ("chainlat.yaml", VALID_YAML)):
        path = tmp_path / name
        path.write_text(text)
        code, out, err = check(capsys, str(good_traces), "--budgets", str(path))
        assert code == 0, err
        assert "answer" in out


@pytest.mark.parametrize(
    ("suffix", "text", "count"), [("toml", VALID_TOML, 250), ("yaml", VALID_YAML, 150)]
)
def test_a_mutated_budget_file_never_gives_a_traceback(
    capsys: pytest.CaptureFixture[str],
    good_traces: Path,
    tmp_path: Path,
    suffix: str,
    text: str,
    count: int,
) -> None:
    rng = random.Random(f"budgets-{suffix}")
    path = tmp_path / f"chainlat.{suffix}"
    outcomes: dict[int, int] = {}
    for _ in range(count):
        path.write_bytes(mutate(text, rng))
        code, out, err = check(capsys, str(good_traces), "--budgets", str(path))
        outcomes[code] = outcomes.get(code, 0) + 1
        if code == 2 and out:
            # A valid file with limits that cannot be judged: judged, then a line per limit
            # not judged, each naming the file.
            assert "Traceback" not in err
            starts = (f"chainlat: {path}: ", "chainlat: nothing to judge")
            assert all(line.startswith(starts) for line in err.splitlines()), err
        elif code == 2:
            line = assert_one_clear_line(code, err)
            # A broken file is named; a valid one that judges nothing says so.
            assert str(path) in line or line.startswith("chainlat: nothing to judge"), line
        else:
            assert code in (0, 1), (code, err)
            assert "answer" in out
    assert outcomes.get(2, 0) > count // 4  # most mutations break the file: they were judged


def test_a_broken_budget_file_in_a_real_process_prints_one_line(
    good_traces: Path, tmp_path: Path
) -> None:
    path = tmp_path / "chainlat.toml"
    path.write_bytes(b'[workflows.answer]\ntotal = "2s\n\xff\xfe')
    result = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", str(good_traces), "--budgets", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_one_clear_line(result.returncode, result.stderr, mentions=str(path))
    assert result.stdout == ""


# -- trace files ------------------------------------------------------------------------------


def _spans_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def _with(edit: Callable[[list[dict[str, Any]]], None]) -> str:
    doc = copy.deepcopy(workflow_request())
    edit(_spans_of(doc))
    return json.dumps(doc) + "\n"


def _set(index: int, key: str, value: object) -> Callable[[list[dict[str, Any]]], None]:
    def edit(spans: list[dict[str, Any]]) -> None:
        spans[index][key] = value

    return edit


BAD_FILES: dict[str, tuple[Callable[[], bytes], str]] = {
    # name: (content, what the message must mention besides the file name)
    # A corrupt line among good ones is skipped and counted (tests/traces/test_hostile_traces.py);
    # a file where no line is spans is bad input.
    "corrupt line": (lambda: b"{not json\n{nor this\n", ":1: not valid JSON"),
    "truncated": (lambda: json.dumps(workflow_request()).encode()[:500], ":1: truncated"),
    "empty": (lambda: b"", "empty file"),
    "binary": (lambda: bytes(range(256)) * 40, ":1: not valid JSON"),
    "wrong-typed start time": (
        lambda: _with(_set(0, "startTimeUnixNano", {"nano": 1})).encode(),
        "startTimeUnixNano: expected an integer",
    ),
    "wrong-typed span id": (
        lambda: _with(_set(1, "spanId", 12345)).encode(),
        "spanId: expected a hex id",
    ),
    "a span that is not an object": (
        lambda: _with(lambda spans: spans.append("span")).encode(),  # type: ignore[arg-type]
        "expected a span object",
    ),
    "not a trace at all": (lambda: b'{"hello": "world"}\n', "expected an OTLP/JSON request"),
    "no workflow span": (
        lambda: _with(
            lambda spans: spans.__setitem__(slice(None), [s for s in spans if "parentSpanId" in s])
        ).encode(),
        "nothing to judge",
    ),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_trace_file_gives_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    content, mentions = BAD_FILES[name]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content())
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    line = assert_one_clear_line(code, err, mentions=mentions)
    assert str(path) in line or path.name in line
    assert out == ""


def _parent_of(spans: list[dict[str, Any]], index: int) -> dict[str, Any]:
    parent_id = spans[index]["parentSpanId"]
    return next(s for s in spans if s["spanId"] == parent_id)


def _skew(spans: list[dict[str, Any]]) -> None:
    """The first span starts 50 ms before its parent, as on a host whose clock is behind."""
    parent_start = int(_parent_of(spans, 0)["startTimeUnixNano"])
    spans[0]["startTimeUnixNano"] = str(parent_start - 50_000_000)


WRONG_SPANS: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    # name: (edit, what the one line must say)
    "attributes not a list": (
        _set(0, "attributes", "oops"),
        ":1: resourceSpans[0].scopeSpans[0].spans[0].attributes: expected a list of key/value"
        " pairs, got a string",
    ),
    "an attribute not an object": (
        _set(0, "attributes", [7]),
        ":1: resourceSpans[0].scopeSpans[0].spans[0].attributes[0]: expected an object",
    ),
    "events not a list": (
        _set(0, "events", {"name": "x"}),
        ":1: resourceSpans[0].scopeSpans[0].spans[0].events: expected a list of events, "
        "got an object",
    ),
}


@pytest.mark.parametrize("name", list(WRONG_SPANS))
def test_a_wrong_span_gives_one_line_naming_file_line_and_field(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    edit, mentions = WRONG_SPANS[name]
    path = tmp_path / "odd.jsonl"
    path.write_text(_with(edit))
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=f"{path}{mentions}")
    assert out == ""


def test_a_span_with_a_negative_duration_is_dropped_alone_in_one_warning_line(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """The span, not its line: the run is still judged, and one warning names the span."""
    path = tmp_path / "odd.jsonl"
    path.write_text(
        _with(
            lambda spans: spans[0].update(
                endTimeUnixNano=str(int(spans[0]["startTimeUnixNano"]) - 5_000_000)
            )
        )
    )
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    span = _spans_of(json.loads(path.read_text()))[0]
    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    assert code in (0, 1), err
    assert "OK" in out or "FAILED" in out
    (line,) = err.splitlines()
    assert line.startswith("chainlat: warning: 1 spans end before they start and were dropped")
    assert f"{path}:1: resourceSpans[0].scopeSpans[0].spans[0]: span 'data retrieve-docs' (" in line
    assert line.endswith(
        f"ends before it starts (end {end} < start {start} ns): a negative duration)"
    ), line


def _request_with(edit: Callable[[dict[str, Any]], None]) -> str:
    doc = copy.deepcopy(workflow_request())
    edit(doc)
    return json.dumps(doc) + "\n"


WRONG_CONTAINERS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "resourceSpans not a list": (
        lambda doc: doc.update(resourceSpans={"spans": []}),
        ":1: resourceSpans: expected a list, got an object",
    ),
    "a resource not an object": (
        lambda doc: doc["resourceSpans"].append("r"),
        ":1: resourceSpans[1]: expected an object, got a string",
    ),
    "scopeSpans not a list": (
        lambda doc: doc["resourceSpans"][0].update(scopeSpans="s"),
        ":1: resourceSpans[0].scopeSpans: expected a list of scopes, got a string",
    ),
    "spans not a list": (
        lambda doc: doc["resourceSpans"][0]["scopeSpans"][0].update(spans=12),
        ":1: resourceSpans[0].scopeSpans[0].spans: expected a list, got a number",
    ),
}


@pytest.mark.parametrize("name", list(WRONG_CONTAINERS))
def test_a_wrong_typed_container_is_bad_input_not_no_spans(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    edit, mentions = WRONG_CONTAINERS[name]
    path = tmp_path / "odd.jsonl"
    path.write_text(_request_with(edit))
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=f"{path}{mentions}")
    assert out == ""


def test_a_huge_wrong_typed_value_is_quoted_short(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """An error quotes at most 60 characters of a value, so 10 MB of it gives a short line."""
    path = tmp_path / "odd.jsonl"
    path.write_text(_with(_set(0, "startTimeUnixNano", "9x" * 5_000_000)))
    code, _, err = check(capsys, str(path), "--budgets", str(budgets))
    line = assert_one_clear_line(code, err, mentions="startTimeUnixNano: expected an integer")
    assert line.endswith("got " + repr("9x" * 100)[:60] + "…"), line[-100:]
    assert len(line) < 250


def test_a_huge_wrong_value_in_a_budget_file_is_quoted_short(
    capsys: pytest.CaptureFixture[str], good_traces: Path, tmp_path: Path
) -> None:
    path = tmp_path / "chainlat.toml"
    path.write_text(
        f'[workflows.answer]\ncache = "{"y" * 1_000_000}"\nmin_runs = "{"z" * 1_000_000}"\n'
    )
    code, _, err = check(capsys, str(good_traces), "--budgets", str(path))
    line = assert_one_clear_line(code, err, mentions=str(path))
    assert len(line) < 500, line[:600]


ODD_BUT_COMMON: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    # name: (edit, the one warning line)
    "child starts before its parent": (
        _skew,
        "chainlat: warning: 1 spans start before their parent (clock skew); clipped to the parent",
    ),
    "missing parent": (
        _set(0, "parentSpanId", "00000000000000ff"),
        "chainlat: warning: 1 spans have a parent missing from their trace (sampling or a "
        "partial trace); read without it",
    ),
}


@pytest.mark.parametrize("name", list(ODD_BUT_COMMON))
def test_skewed_and_orphan_spans_pass_with_one_warning(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    """Real traces have skewed clocks and sampled-out parents: judged, counted, warned once."""
    edit, warning = ODD_BUT_COMMON[name]
    path = tmp_path / "odd.jsonl"
    path.write_text(_with(edit))
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    assert code == 0, err
    assert err.splitlines() == [warning]
    assert "answer" in out


def test_each_kind_of_oddity_is_one_line_with_its_count(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    def edit(spans: list[dict[str, Any]]) -> None:
        _skew(spans)
        spans[3]["startTimeUnixNano"] = str(int(_parent_of(spans, 3)["startTimeUnixNano"]) - 1)
        spans[1]["parentSpanId"] = "00000000000000fe"
        spans[4]["parentSpanId"] = "00000000000000fd"

    path = tmp_path / "odd.jsonl"
    path.write_text(_with(edit))
    # A step read without its parent leaves one run short of min_runs: allowed here, since
    # the warnings are what is looked at.
    code, _, err = check(capsys, str(path), "--budgets", str(budgets), "--allow-unjudged")
    assert code == 0, err
    assert [line.split(" spans ")[0] for line in err.splitlines()] == [
        "chainlat: warning: 2",
        "chainlat: warning: 2",
    ]
    assert "clock skew" in err
    assert "missing" in err


def test_a_parent_in_another_service_is_not_missing(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """A workflow span flagged with a remote parent (OTLP flags 0x300) is a local root."""

    def edit(spans: list[dict[str, Any]]) -> None:
        for span in spans:
            if "parentSpanId" not in span:
                span["parentSpanId"] = "00000000000000aa"
                span["flags"] = 0x300

    path = tmp_path / "remote.jsonl"
    path.write_text(_with(edit))
    code, _, err = check(capsys, str(path), "--budgets", str(budgets))
    assert code == 0, err
    assert err == ""


def test_an_attribute_value_of_the_wrong_type_is_ignored(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """A value that does not parse is left out, as an unknown attribute would be."""
    path = tmp_path / "odd.jsonl"
    path.write_text(
        _with(_set(0, "attributes", [{"key": "chainlat.step.kind", "value": {"intValue": "x"}}]))
    )
    code, _, err = check(capsys, str(path), "--budgets", str(budgets))
    assert code == 0, err
    assert err == ""


HUNDRED_MB = 100 * 2**20


@pytest.fixture
def huge_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "huge.jsonl"
    yield path
    path.unlink(missing_ok=True)


def test_a_100_mb_line_of_garbage_gives_one_short_line(
    capsys: pytest.CaptureFixture[str], budgets: Path, huge_file: Path
) -> None:
    with huge_file.open("wb") as out:
        out.write(b'{"resourceSpans": [')
        out.write(b"x" * HUNDRED_MB)
        out.write(b"\n")
    code, _, err = check(capsys, str(huge_file), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=":1: not valid JSON")


def test_a_truncated_100_mb_line_gives_one_short_line(
    capsys: pytest.CaptureFixture[str], budgets: Path, huge_file: Path
) -> None:
    with huge_file.open("wb") as out:
        out.write(b'{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": ')
        out.write(b'{"stringValue": "' + b"y" * HUNDRED_MB)
    code, _, err = check(capsys, str(huge_file), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=":1: truncated")


def test_a_valid_100_mb_line_is_read(
    capsys: pytest.CaptureFixture[str], budgets: Path, huge_file: Path
) -> None:
    """A 100 MB prompt captured on a span is a big line, not a bad one."""
    doc = workflow_request()
    _spans_of(doc)[1].setdefault("attributes", []).append(
        {"key": "gen_ai.input.messages", "value": {"stringValue": "z" * HUNDRED_MB}}
    )
    huge_file.write_text(json.dumps(doc) + "\n")
    del doc
    code, out, err = check(capsys, str(huge_file), "--budgets", str(budgets))
    assert code == 0, err[:2000]
    assert "answer" in out


# -- Jaeger's HTTP API --------------------------------------------------------------------


class FakeJaeger:
    """Answers every GET with HTML, or holds it until released."""

    def __init__(self, mode: str) -> None:
        self.release = threading.Event()
        jaeger = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if mode == "hang":
                    jaeger.release.wait(30)
                    return
                body = b"<!doctype html><html><body><h1>Sign in</h1>" + b"<p>x</p>" * 5000
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_jaeger_that_refuses(capsys: pytest.CaptureFixture[str], budgets: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, _, err = check(capsys, "--jaeger", url, "--service", "svc", "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions="cannot reach Jaeger")


def test_jaeger_that_answers_html(capsys: pytest.CaptureFixture[str], budgets: Path) -> None:
    jaeger = FakeJaeger("html")
    try:
        code, _, err = check(
            capsys, "--jaeger", jaeger.url, "--service", "svc", "--budgets", str(budgets)
        )
    finally:
        jaeger.close()
    assert_one_clear_line(code, err, mentions="HTTP 200")


def test_jaeger_that_never_answers(
    capsys: pytest.CaptureFixture[str], budgets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI waits 30 s for Jaeger; the test shortens that to 1 s.
    original = traces.JaegerSource.__init__

    def short_timeout(self: traces.JaegerSource, *args: Any, **kwargs: Any) -> None:
        kwargs["timeout_s"] = 1.0
        original(self, *args, **kwargs)

    monkeypatch.setattr(traces.JaegerSource, "__init__", short_timeout)
    jaeger = FakeJaeger("hang")
    try:
        code, _, err = check(
            capsys, "--jaeger", jaeger.url, "--service", "svc", "--budgets", str(budgets)
        )
    finally:
        jaeger.close()
    assert_one_clear_line(code, err, mentions="timed out")
