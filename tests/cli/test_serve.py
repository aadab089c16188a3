"""``chainlat serve`` and ``chainlat run -- CMD`` with real exporters on 127.0.0.1: the
OpenTelemetry SDK in an application that knows nothing of chainlat."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chainlat.cli import main

APP = textwrap.dedent(
    """
    import os, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("app")
    T0, MS = 1_700_000_000_000_000_000, 1_000_000
    step_ms = int(sys.argv[1])
    attributes = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support"}
    workflow = tracer.start_span("invoke_workflow support", start_time=T0, attributes=attributes)
    context = trace.set_span_in_context(workflow)
    step = tracer.start_span("retrieve docs", context=context, start_time=T0 + MS)
    step.end(end_time=T0 + MS + step_ms * MS)
    workflow.end(end_time=T0 + 2 * MS + step_ms * MS)
    provider.shutdown()
    """
)
BUDGETS = '[workflows.support]\ntotal = "100ms"\n'


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "budgets.toml").write_text(BUDGETS)
    path = tmp_path / "app.py"
    path.write_text(APP)
    return path


def _run(app: Path, step_ms: int, *options: str) -> int:
    command = [sys.executable, str(app), str(step_ms)]
    return main(["run", "--budgets", "budgets.toml", "--wait", "0.2", *options, "--", *command])


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_run_judges_the_spans_cmd_exported_kept_0_broken_1(
    app: Path, protocol: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    assert _run(app, 50) == 0
    out, err = capsys.readouterr()
    assert "OK: all 1 limit judged and kept" in out
    assert "support, total 52.0 ms, first output -: kept" in err
    assert _run(app, 150) == 1
    out, err = capsys.readouterr()
    assert "BROKEN: workflows.support.total" in out
    assert "support: total 152.0 ms > limit 100 ms" in err


def test_the_out_file_of_run_gives_check_the_same_verdict(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(app, 150, "--out", "received.jsonl", "--format", "json") == 1
    by_run = json.loads(capsys.readouterr().out)
    assert main(["check", "received.jsonl", "--budgets", "budgets.toml", "--format", "json"]) == 1
    by_check = json.loads(capsys.readouterr().out)
    assert by_run["verdicts"] == by_check["verdicts"]


def test_run_exits_with_the_code_of_a_cmd_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--wait", "0", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert "exited with code 3" in capsys.readouterr().err


def test_a_cmd_that_sends_no_span_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--wait", "0", "--", sys.executable, "-c", "pass"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sent no spans" in err


def test_run_without_a_command_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_run_points_the_exporter_at_the_receiver_and_changes_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHAINLAT_TEST_KEPT", "yes")
    show = "import os, json; print(json.dumps(dict(os.environ)), file=open('env.json', 'w'))"
    main(["run", "--wait", "0", "--", sys.executable, "-c", show])
    env = json.loads((tmp_path / "env.json").read_text())
    assert re.fullmatch(
        r"http://127\.0\.0\.1:\d+/v1/traces", env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    )
    assert env["OTEL_TRACES_EXPORTER"] == "otlp" and env["CHAINLAT_TEST_KEPT"] == "yes"
    changed = {k for k in env if os.environ.get(k) != env[k]}
    assert changed == {
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_TRACES_EXPORTER",
    }


def test_serve_writes_every_span_and_prints_the_check_on_sigint(app: Path, tmp_path: Path) -> None:
    """A real process: ports printed, the SDK's HTTP and gRPC exporters, SIGINT, the verdict."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "chainlat.cli", "serve", "--port", "0", "--grpc-port", "0",
         "--out", "received.jsonl", "--budgets", "budgets.toml"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert serve.stderr is not None
        banner = serve.stderr.readline()
        ports = re.search(
            r"http://127\.0\.0\.1:(\d+)/v1/traces, OTLP/gRPC on 127\.0\.0\.1:(\d+)", banner
        )
        assert ports, banner
        http, grpc = ports.groups()
        for protocol, endpoint in (("http/protobuf", f"http://127.0.0.1:{http}"),
                                   ("grpc", f"http://127.0.0.1:{grpc}")):  # fmt: skip
            env = {**os.environ, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                   "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}  # fmt: skip
            if protocol != "grpc":
                env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{endpoint}/v1/traces"
            subprocess.run([sys.executable, str(app), "50"], env=env, check=True, timeout=60)
        serve.send_signal(signal.SIGINT)
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert serve.returncode == 0, err
    assert "2 runs of 1 workflow from received.jsonl" in out and "OK: all 1 limit" in out
    spans = [
        s
        for line in (tmp_path / "received.jsonl").read_text().splitlines()
        for r in json.loads(line)["resourceSpans"]
        for scope in r["scopeSpans"]
        for s in scope["spans"]
    ]
    assert len(spans) == 4
