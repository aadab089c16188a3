"""The trace readers under hostile input (issue 11): one clear line and exit 2 for bad input,
a broken budget always fails, memory and time bounded, every dropped thing counted."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import chainlat
from chainlat.cli import main
from chainlat.traces import FileSource, JaegerSource, ReadCounters, _parse, read_runs
from chainlat.traces._assemble import Assembler
from chainlat.traces._parse import Parsed
from support.tracegen import DATA_DIR, ChatRun, write_runs

BUDGETS = """\
[workflows.support-chat]
total = "1000ms"
"""

FAST = ChatRun(retrieve_ms=20, ttft_ms=10, chat_ms=30, tool_ms=None, glue_ms=5)
SLOW = ChatRun(retrieve_ms=500, ttft_ms=100, chat_ms=1000, tool_ms=500, glue_ms=2)


def check(capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]) -> tuple[int, str]:
    code = main(["check", "--no-progress", *(str(a) for a in args)])
    return code, capsys.readouterr().err


def one_clear_line(code: int, err: str, *mentions: str) -> str:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("chainlat: "), err[:2000]
    assert "Traceback" not in err
    for mention in mentions:
        assert mention in err, err
    return err


@pytest.fixture
def budgets(tmp_path: Path) -> Path:
    path = tmp_path / "chainlat.toml"
    path.write_text(BUDGETS)
    return path


# --- item 5: a slow run written span by span among other requests -------------------------


def slow_run_among_others(tmp_path: Path, others: int = 400) -> Path:
    """The slow run's first step, then ``others`` fast runs (4 lines each), then the rest of
    the slow run with its root: the root arrives over 1,000 lines after its first span."""
    slow = write_runs(tmp_path / "slow.jsonl", [SLOW], batch=None).read_text().splitlines()
    fast = write_runs(tmp_path / "fast.jsonl", [FAST] * others, batch=None).read_text()
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([slow[0], *fast.splitlines(), *slow[1:]]) + "\n")
    return path


def test_a_root_arriving_after_1000_lines_is_merged_and_breaks_the_budget(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the slow run's trace was closed after 1,000 idle lines, its root counted late,
    and check printed OK with exit 0."""
    path = slow_run_among_others(tmp_path)
    counters = ReadCounters()
    runs = list(read_runs([path], counters=counters))
    slow = [r for r in runs if r.rollup.total_ms > 1000]
    assert len(slow) == 1 and len(slow[0].steps) == 3
    assert counters.late_spans == 0 and counters.evicted_traces == 0
    code, err = check(capsys, path, "--budgets", budgets)
    assert code == 1, err


def test_past_the_open_trace_bound_traces_are_judged_early_counted_and_named(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = slow_run_among_others(tmp_path, others=20)
    counters = ReadCounters()
    list(FileSource(path, max_open_traces=1).runs(counters))
    assert counters.evicted_traces >= 1 and counters.evicted_by == "--max-open-traces"
    assert counters.peak_open_traces <= 2
    assert counters.reopened_traces >= 1  # the slow run's root, after its steps were judged
    code, err = check(capsys, path, "--budgets", budgets, "--max-open-traces", "1")
    assert "raise --max-open-traces" in err
    assert code == 1, "the slow run's root, come after its trace was judged, is still judged"
    counters = ReadCounters()
    list(FileSource(path, max_open_bytes=1000).runs(counters))
    assert counters.evicted_by == "--max-open-bytes"


# --- item 16: a bad line among good ones ------------------------------------------------------


def test_a_half_written_line_among_good_ones_is_skipped_and_the_runs_judged(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the whole file was rejected (exit 2) for its one bad line."""
    good = write_runs(tmp_path / "g.jsonl", [FAST, SLOW, FAST], batch=None).read_text()
    lines = good.splitlines()
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([lines[0], lines[1][: len(lines[1]) // 2], *lines[2:]]) + "\n")
    counters = ReadCounters()
    list(read_runs([path], counters=counters))
    assert counters.bad_lines == 1 and counters.first_bad_line.startswith(f"{path}:2: ")
    code, err = check(capsys, path, "--budgets", budgets)
    assert code == 1
    assert f"1 lines are not spans and were skipped (the first: {path}:2: not valid JSON" in err


def test_a_bad_span_skips_its_line_not_the_file(tmp_path: Path) -> None:
    lines = write_runs(tmp_path / "g.jsonl", [FAST, FAST], batch=4).read_text().splitlines()
    doc = json.loads(lines[0])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "xyz"
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n")
    counters = ReadCounters()
    runs = list(read_runs([path], counters=counters))
    assert len(runs) == 1 and counters.bad_lines == 1
    assert "spans[0].traceId: expected 32 hex digits" in counters.first_bad_line


# --- item 14: huge lines, /dev/zero, a corrupt first line of a big file ------------------------

_PEAK = """
import resource, sys
from chainlat.traces import FileSource
from chainlat._core.errors import TraceSourceError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    list(FileSource(sys.argv[1], max_line_bytes=int(sys.argv[2])).runs())
except TraceSourceError as exc:
    print(exc)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def peak_mib(path: str | Path, max_line_bytes: int) -> tuple[str, int]:
    """The error and the growth of peak RSS (MiB) of reading ``path`` in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path), str(max_line_bytes)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    message, grown = done.stdout.strip().rsplit("\n", 1)
    return message, int(grown)


def test_a_gzip_of_one_512_mib_line_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """Before: the line was decompressed whole (memory = its size)."""
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(_bomb(512, prefix=b""))
    assert path.stat().st_size < 4 * 1024 * 1024
    message, grown = peak_mib(path, 8 * 1024 * 1024)
    assert message == (
        f"{path}:1: a line longer than 8 MiB: not a trace file, or raise --max-line-bytes"
    )
    assert grown < 64, f"peak RSS grew by {grown} MiB"


def test_dev_zero_is_refused_in_bounded_memory_and_time() -> None:
    """Before: /dev/zero was read until memory ran out."""
    started = time.monotonic()
    message, grown = peak_mib("/dev/zero", 8 * 1024 * 1024)
    assert "/dev/zero:1: a line longer than 8 MiB" in message
    assert grown < 64 and time.monotonic() - started < 60


def test_a_big_file_with_a_corrupt_first_line_is_not_read_as_one_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a corrupt first line made the reader load the whole file as one document."""
    from chainlat.traces import _files

    lines = write_runs(tmp_path / "g.jsonl", [FAST] * 20, batch=4).read_text().splitlines()
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(["{corrupt", *lines]) + "\n")
    monkeypatch.setattr(_files, "MAX_DOCUMENT_BYTES", 1000)
    read: list[int] = []
    real = _files.FileSource._whole_document

    def whole(self: FileSource, doc: object, assembler: Any) -> Iterator[Any]:
        read.append(1)
        return real(self, doc, assembler)

    monkeypatch.setattr(_files.FileSource, "_whole_document", whole)
    counters = ReadCounters()
    assert len(list(read_runs([path], counters=counters))) == 20
    assert counters.bad_lines == 1 and read == []


def test_a_pretty_printed_document_is_still_read(tmp_path: Path) -> None:
    lines = write_runs(tmp_path / "g.jsonl", [FAST], batch=None).read_text().splitlines()
    docs = [json.loads(line) for line in lines]
    spans = [s for d in docs for s in d["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    docs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    path = tmp_path / "t.json"
    path.write_text(json.dumps(docs[0], indent=2))
    assert len(list(read_runs([path]))) == 1


# --- item 12: deep nesting, lone surrogates, overflowing and invalid arguments --------------


def test_json_nested_deeper_than_any_parser_is_one_clear_line(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in {
        "line": '{"resourceSpans": ' + "[" * 5000 + "]" * 5000 + "}\n",
        "pretty": '{\n"resourceSpans": ' + "[" * 5000 + "]" * 5000 + "}\n",
        "jaeger": '{"data": [{"traceID": "1", "spans": ' + "[" * 3000 + "]" * 3000 + "}]}\n",
    }.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        one_clear_line(*check(capsys, path, "--budgets", budgets), str(path))


def test_lone_surrogates_are_replaced_not_fatal(tmp_path: Path) -> None:
    """Before (through the standard library's parser): names with lone surrogates crashed
    the rendering; orjson refused the whole line."""
    lines = write_runs(tmp_path / "g.jsonl", [FAST], batch=None).read_text().splitlines()
    path = tmp_path / "t.jsonl"
    root = lines[-1].replace('"name":"invoke_workflow support-chat"', '"name":"chat \\ud800"')
    assert root != lines[-1]
    path.write_text("\n".join([*lines[:-1], root]) + "\n")
    (run,) = read_runs([path], roots=True)
    assert run.root is not None and run.root.record.name == "chat \ufffd"
    run.root.record.name.encode("utf-8")


def test_lookback_overflow_and_a_bad_url_are_one_clear_line(
    budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: OverflowError and httpx.InvalidURL tracebacks."""
    common = ["--budgets", str(budgets), "--service", "s", "--timeout", "5"]
    one_clear_line(
        *check(capsys, "--jaeger", "http://localhost:1", "--lookback", "99999999999w", *common),
        "--lookback",
    )
    one_clear_line(*check(capsys, "--jaeger", "http://[::1", *common), "http://[::1")
    one_clear_line(
        *check(capsys, "--jaeger", "http://localhost:1", "--lookback", "999999w", *common),
        "cannot reach Jaeger",
    )


# --- item 6: non-finite numbers ------------------------------------------------------------


def test_a_nan_recorded_rollup_is_recomputed_and_counted(tmp_path: Path) -> None:
    """Before: a recorded total of "NaN" passed every budget."""
    lines = write_runs(tmp_path / "g.jsonl", [SLOW], batch=None).read_text().splitlines()
    root = json.loads(lines[-1])
    span = root["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for item in span["attributes"]:
        if item["key"] == "chainlat.chain.total_ms":
            item["value"] = {"doubleValue": "NaN"}
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([*lines[:-1], json.dumps(root)]) + "\n")
    counters = ReadCounters()
    (run,) = read_runs([path], counters=counters)
    assert run.rollup.total_ms == pytest.approx(2002.0)
    assert counters.nonfinite_values == 1
    assert "NaN, infinite or out-of-range" in counters.warnings()[-1]


def test_timestamps_beyond_64_bits_do_not_propagate(tmp_path: Path) -> None:
    lines = write_runs(tmp_path / "g.jsonl", [FAST, FAST], batch=4).read_text().splitlines()
    doc = json.loads(lines[0])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["endTimeUnixNano"] = "9" * 400
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n")
    counters = ReadCounters()
    runs = list(read_runs([path], counters=counters))
    assert counters.bad_lines == 1 and "endTimeUnixNano" in counters.first_bad_line
    assert all(r.rollup.total_ms < 1e6 for r in runs)


# --- item 17: one long-lived span over thousands of workflows ---------------------------------


def nested_workflows(path: Path, workflows: int) -> Path:
    """``workflows`` workflows of 3 steps under one server span of one trace."""
    trace_id = "ab" * 16
    spans: list[dict[str, Any]] = []

    def span(span_id: int, parent: int | None, name: str, start: int, **kv: str) -> None:
        raw: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": f"{span_id:016x}",
            "name": name,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 1_000_000),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in kv.items()],
        }
        if parent is not None:
            raw["parentSpanId"] = f"{parent:016x}"
        spans.append(raw)

    for w in range(workflows):
        wid = 2 + 4 * w
        span(wid, 1, "invoke_workflow w", 10 + w, **{"gen_ai.operation.name": "invoke_workflow"})
        for k in range(3):
            span(wid + 1 + k, wid, "chat m", 10 + w, **{"gen_ai.operation.name": "chat"})
    span(1, None, "POST /chat", 0)
    with path.open("w") as out:
        for first in range(0, len(spans), 500):
            batch = spans[first : first + 500]
            out.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}) + "\n")
    return path


def test_work_per_workflow_is_constant_under_one_long_lived_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts the spans visited while judging (deterministic): linear in the workflows.
    Before the rewrite of runs_of_trace, time grew 4x per doubling (41.6 s for 8k)."""
    from chainlat._core import trace_runs as runs_module

    visits = [0]
    real_get = runs_module.is_outcome

    def counted(span: Any) -> bool:
        visits[0] += 1
        return real_get(span)

    monkeypatch.setattr(runs_module, "is_outcome", counted)
    per_workflow = []
    for n in (1000, 4000):
        visits[0] = 0
        found = list(read_runs([nested_workflows(tmp_path / f"{n}.jsonl", n)]))
        assert len(found) == n
        per_workflow.append(visits[0] / n)
    assert per_workflow[1] <= per_workflow[0] * 1.1, per_workflow


# --- item 13: Jaeger that drips, bombs or floods ------------------------------------------------


class _Server:
    def __init__(self, respond: Callable[[http.server.BaseHTTPRequestHandler], None]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    respond(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[http.server.BaseHTTPRequestHandler], None]], str]]:
    servers: list[_Server] = []

    def start(respond: Callable[[http.server.BaseHTTPRequestHandler], None]) -> str:
        servers.append(_Server(respond))
        return servers[-1].url

    yield start
    for server in servers:
        server.close()


def _drip(handler: http.server.BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    for _ in range(120):  # a minute, unless the client goes away
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.5)


def test_a_jaeger_that_drips_one_byte_every_half_second_is_stopped_at_the_deadline(
    serve: Callable[..., str], budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: each byte reset the per-read timeout, and check ran indefinitely."""
    url = serve(_drip)
    started = time.monotonic()
    code, err = check(
        capsys, "--budgets", budgets, "--jaeger", url, "--service", "s", "--timeout", "2"
    )
    elapsed = time.monotonic() - started
    one_clear_line(code, err, "within 2 s; raise --timeout")
    assert 1.5 < elapsed < 5


def _gzip_bomb(handler: http.server.BaseHTTPRequestHandler) -> None:
    body = _big_bomb()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Encoding", "gzip")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _bomb(mib: int = 2048, prefix: bytes = b'{"data": ["') -> bytes:
    """A gzip answer of ``mib`` MiB of zeros, built fast: after a full flush, deflate writes
    the same bytes for every MiB of zeros, so one block is compressed and repeated."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    chunk = b"\0" * (1024 * 1024)
    head = packer.compress(prefix) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    assert packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH) == block
    crc = zlib.crc32(prefix)
    for _ in range(mib):
        crc = zlib.crc32(chunk, crc)
    size = (len(prefix) + mib * len(chunk)) % 2**32
    trailer = crc.to_bytes(4, "little") + size.to_bytes(4, "little")
    return b"\x1f\x8b\x08\0\0\0\0\0\0\xff" + head + block * mib + packer.flush() + trailer


@functools.cache
def _big_bomb() -> bytes:
    return _bomb()


def test_a_gzip_bomb_from_jaeger_stops_at_the_cap_in_bounded_memory(
    serve: Callable[..., str],
) -> None:
    """Before: the 2 GiB answer was decompressed whole into memory."""
    import tracemalloc

    assert len(_big_bomb()) < 3 * 1024 * 1024
    url = serve(_gzip_bomb)
    source = JaegerSource(url, "s", timeout_s=30, max_response_bytes=16 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(chainlat.TraceSourceError) as caught:
            list(source.runs())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "over 16777216 bytes (decompressed)" in str(caught.value)
    assert "raise --max-response-bytes" in str(caught.value)
    assert peak < 64 * 1024 * 1024, peak


def test_a_plain_answer_over_the_cap_is_refused(
    serve: Callable[..., str], budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def flood(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        for _ in range(64):
            handler.wfile.write(b" " * 65536)

    url = serve(flood)
    args: list[str | Path] = ["--budgets", budgets, "--jaeger", url, "--service", "s"]
    one_clear_line(*check(capsys, *args, "--max-response-bytes", "100000"), "--max-response-bytes")


def test_the_cli_passes_its_bounds_to_the_sources(tmp_path: Path) -> None:
    from chainlat.cli import build_parser
    from chainlat.cli.sources import sources_from

    args = build_parser().parse_args(
        textwrap.dedent(
            """check f.jsonl --jaeger http://j --service s --timeout 7 --max-response-bytes 9
            --max-line-bytes 11 --max-open-traces 13 --max-open-bytes 17"""
        ).split()
    )
    file, jaeger = sources_from(args)
    assert isinstance(file, FileSource) and isinstance(jaeger, JaegerSource)
    assert (file.max_line_bytes, file.max_open_traces, file.max_open_bytes) == (11, 13, 17)
    assert (jaeger.timeout_s, jaeger.max_response_bytes) == (7.0, 9)
    assert _parse.tally.nonfinite_values >= 0


@pytest.mark.parametrize(
    "options",
    [{}, {"max_open_traces": 1}, {"max_open_bytes": 1000}, {"settle_lines": 0}],
    ids=["default", "one-open-trace", "1000-bytes", "no-settling"],
)
def test_a_line_added_in_one_loop_is_a_line_added_span_by_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, int]
) -> None:
    """``Assembler.add_line`` on a whole line gives the traces and counters of adding its
    spans one at a time (``add``): late, evicted and reopened traces, and the peaks (taken
    once a line), included."""
    path = slow_run_among_others(tmp_path, others=20)
    batched = write_runs(tmp_path / "batched.jsonl", [FAST, SLOW] * 20)  # many spans a line
    whole_line = Assembler.add_line
    for source in (path, batched, DATA_DIR / "collector-traces.jsonl"):

        def read(source: Path = source) -> tuple[list[object], ReadCounters]:
            counters = ReadCounters()
            traces = list(FileSource(source, **options).traces(counters))  # type: ignore[arg-type]
            return [(t.trace_id, t.spans) for t in traces], counters

        one_loop = read()
        with monkeypatch.context() as patch:

            def span_by_span(
                self: Assembler, spans: list[Parsed], line: int, size: int = 0
            ) -> None:
                for span in spans:
                    whole_line(self, (span,), line, size)

            patch.setattr(Assembler, "add_line", span_by_span)
            assert read() == one_loop
        assert one_loop[1].spans > 0
