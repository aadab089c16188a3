"""chainlat profile / whatif / compare through main([...]), and once as a real subprocess."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.analysis.profiles import load_profiles
from chainlat.cli import main
from chainlat.testing import Capture
from support import StartFakeJaeger
from support.whatif import PROFILES


@pytest.fixture
def traces(cap: Capture, tmp_path: Path) -> Path:
    """Three runs per variant: chat (big: 200 ms, small: 50 ms) then a 5 ms tool, 1 ms glue."""
    p, clock = cap.provider, cap.clock
    for variant, model, chat_ms in (("large", "big", 200), ("small", "small", 50)):
        for i in range(3):
            with chainlat.workflow("agent", variant=variant, tracer_provider=p) as run:
                clock.advance(1)
                with chainlat.inference(model, tracer_provider=p) as call:
                    clock.advance(chat_ms)
                    call.record_usage(100, 11)
                clock.advance(1)
                with chainlat.tool("lookup", tracer_provider=p):
                    clock.advance(5)
                clock.advance(1)
            run.record_outcome(success=variant == "large" or i == 0, score=0.5)
    file = tmp_path / "traces.jsonl"
    file.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    (tmp_path / "profiles.toml").write_text(PROFILES)
    return file


def test_profile_prints_and_writes_the_fitted_profiles(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = traces.parent / "fitted.json"
    assert main(["profile", str(traces), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "big" in printed and "small" in printed
    assert f"profiles written to {out}" in printed
    fitted = load_profiles(out)
    assert fitted["big"].ttft_base_ms == 200  # output length constant: decode folded in
    assert fitted["big"].decode_ms_per_token is None


def test_whatif_swaps_the_model_and_reports_before_and_after(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = str(traces.parent / "profiles.toml")
    args = ["whatif", str(traces), "--variant", "large", "--profiles", profiles]
    assert main([*args, "--swap", "chat big=small", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [workflow] = report["workflows"]
    assert (workflow["workflow"], workflow["variant"], workflow["runs"]) == ("agent", "large", 3)
    assert workflow["before"]["p50"] == 208
    assert workflow["after"]["p50"] == 58
    assert report["changes"] == ['--swap "chat big=small"']
    assert main([*args, "--swap", "chat big=small", "--drop", "execute_tool lookup"]) == 0
    text = capsys.readouterr().out
    assert "what-if over 3 runs" in text
    assert "(dropped)" in text


def test_whatif_exits_1_when_the_estimate_breaks_the_budget(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = traces.parent / "chainlat.toml"
    budgets.write_text('[workflows.agent]\ntotal = "100ms"\n')
    profiles = str(traces.parent / "profiles.toml")
    base = ["whatif", str(traces), "--profiles", profiles, "--budgets", str(budgets)]
    assert main([*base, "--variant", "large", "--swap", "chat big=small"]) == 0
    assert "budget, estimated runs: OK: all 1 limit judged and kept" in capsys.readouterr().out
    assert main([*base, "--variant", "small", "--swap", "chat small=big"]) == 1
    out = capsys.readouterr().out
    assert "budget, estimated runs: FAILED: 1 of 1 limit broken, 0 not judged" in out
    assert "  BROKEN: agent: total " in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--swap", "chat gpt-4o=gpt-4o-mini"], 'no step named "chat gpt-4o"'),
        (["--swap", "chat big=gpt-9"], "no latency profile for model 'gpt-9'"),
        (["--prompt-scale", "chat big=0"], "the scale must be above 0, got 0"),
        (["--prompt-scale", "chat big=-2"], "the scale must be above 0, got -2"),
        (["--swap", "chat big"], 'expected STEP=VALUE, like "chat gpt-4o=gpt-4o-mini"'),
        (["--cache-hit-rate", "chat big=2"], "the rate must be between 0 and 1"),
        ([], "nothing to change"),
        (["--swap", "chat big=small", "--profiles", "nope.toml"], "nope.toml: no such profile"),
        (["--swap", "chat big=small", "--budgets", "nope.toml"], "nope.toml"),
    ],
)
def test_bad_whatif_input_exits_2_with_one_line(
    traces: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["whatif", str(traces), *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_missing_or_corrupt_trace_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profile", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")  # nothing parses: a line that does not is skipped otherwise
    assert main(["compare", str(bad)]) == 2
    assert "bad.jsonl:1: not valid JSON" in capsys.readouterr().err
    bad.write_text('{"resourceSpans": []}\n{oops\n')
    assert main(["compare", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "nothing to compare: no spans in" in err and "bad.jsonl" in err


def test_compare_prints_variants_and_writes_the_chart(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = traces.parent / "compare.html"
    assert main(["compare", str(traces), "--html", str(html), "--format", "json"]) == 0
    variants = {v["variant"]: v for v in json.loads(capsys.readouterr().out)["variants"]}
    assert variants["large"]["success"]["successes"] == 3
    assert variants["small"]["success"]["successes"] == 1
    assert variants["large"]["p50"] == 208 and variants["small"]["p50"] == 58
    assert variants["large"]["pareto"] and variants["small"]["pareto"]
    assert 'id="chart-tradeoff"' in html.read_text()


def test_compare_takes_an_outcomes_file(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from chainlat.traces import read_runs

    smalls = [r.trace_id for r in read_runs([traces], outcomes=True) if r.variant == "small"]
    outcomes = traces.parent / "outcomes.jsonl"
    outcomes.write_text(
        "".join(json.dumps({"trace_id": t, "success": True}) + "\n" for t in smalls)
    )
    assert main(["compare", str(traces), "--outcomes", str(outcomes), "--format", "json"]) == 0
    variants = {v["variant"]: v for v in json.loads(capsys.readouterr().out)["variants"]}
    assert variants["small"]["success"]["successes"] == 3
    assert not variants["large"]["pareto"]  # now slower and no more successful


# --- Jaeger's HTTP API ------------------------------------------------------------------------

JAEGER_COMMANDS = {
    "profile": [],
    "whatif": ["--variant", "large", "--profiles", "profiles.toml", "--swap", "chat big=small"],
    "compare": [],
}


@pytest.mark.parametrize("command", list(JAEGER_COMMANDS))
def test_jaeger_is_read_as_the_same_traces_in_a_file_are(
    command: str,
    traces: Path,
    fake_jaeger: StartFakeJaeger,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(traces.parent)
    jaeger = fake_jaeger(v3=True, otlp=json.loads(traces.read_text()), service="agent")
    args = [command, *JAEGER_COMMANDS[command], "--format", "json"]
    assert main([*args, str(traces)]) == 0
    from_file = json.loads(capsys.readouterr().out)
    remote = ["--jaeger", jaeger.url, "--service", "agent", "--lookback", "2h", "--limit", "7"]
    assert main([*args, *remote]) == 0
    assert json.loads(capsys.readouterr().out) == from_file
    [(path, query)] = jaeger.requests
    assert path == "/api/v3/traces"
    assert (query["query.service_name"], query["query.num_traces"]) == (["agent"], ["7"])


def test_text_output_names_the_jaeger_source(
    traces: Path, fake_jaeger: StartFakeJaeger, capsys: pytest.CaptureFixture[str]
) -> None:
    jaeger = fake_jaeger(v3=True, otlp=json.loads(traces.read_text()), service="agent")
    assert main(["profile", "--jaeger", jaeger.url, "--service", "agent"]) == 0
    assert f"latency profiles from 6 runs in {jaeger.url} (service agent)" in " ".join(
        capsys.readouterr().out.split()
    )
    assert main(["profile", "--jaeger", jaeger.url, "--service", "quiet"]) == 2
    assert capsys.readouterr().err == (
        f"chainlat: nothing to fit: no spans in {jaeger.url} (service quiet)\n"
    )


@pytest.mark.parametrize("command", list(JAEGER_COMMANDS))
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no traces to read: give trace files or --jaeger URL --service NAME"),
        (["--jaeger", "http://127.0.0.1:9"], "--jaeger needs --service NAME"),
        (["--service", "agent"], "--service needs --jaeger URL"),
        (["--jaeger", "http://x", "--service", "s", "--lookback", "soon"], "--lookback 'soon'"),
        (["--jaeger", "http://127.0.0.1:9", "--service", "s"], "cannot reach Jaeger"),
    ],
)
def test_source_mistakes_exit_2_as_for_check(
    command: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--swap", "chat big=small"] if command == "whatif" else []
    assert main([command, *args, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_whatif_as_a_real_subprocess(traces: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "whatif", str(traces), "--swap", "chat big"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith('chainlat: --swap "chat big": expected STEP=VALUE')
    assert "Traceback" not in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "compare", str(traces)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "agent: variants" in done.stdout


def test_the_trade_off_renderers_return_renderables_and_print_nothing(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    from chainlat.analysis.profiles import fit_profiles
    from chainlat.analysis.tradeoff import compare
    from chainlat.analysis.whatif import whatif
    from chainlat.report.tradeoff import compare_text, profiles_text, whatif_text
    from chainlat.traces import load_runs

    runs = load_runs([traces])
    profiles = fit_profiles(runs)
    result = whatif(runs, variant="large", swap={"chat big": "small"}, profiles=profiles)
    rendered = [
        profiles_text(profiles, len(runs), str(traces)),
        whatif_text(result, str(traces)),
        compare_text(compare(runs)),
    ]
    assert capsys.readouterr().out == ""
    console = Console(width=200, record=True, file=io.StringIO())
    for renderable in rendered:
        console.print(renderable)
    text = console.export_text()
    assert "what-if over 3 runs" in text
    assert "chat big -> " not in text and "chat small" in text
    assert "agent: variants (ms)" in text and "latency profiles from 6 runs" in text


def test_profile_names_the_stream_option_when_streamed_calls_lack_usage(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Calls streamed without token counts give no profile: say which option brings them."""
    p, clock = cap.provider, cap.clock
    for model, usage in (("big", True), ("small", False), ("small", False)):
        with chainlat.workflow("agent", tracer_provider=p):
            with chainlat.inference(model, tracer_provider=p) as call:
                clock.advance(20)
                call.first_token()
                clock.advance(30)
                if usage:
                    call.record_usage(100, 11)
    file = tmp_path / "streamed.jsonl"
    file.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    assert main(["profile", str(file)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "small: no profile: its 2 calls streamed without token counts" in out
    assert 'stream_options={"include_usage": True}' in out
    only_small = tmp_path / "small.jsonl"
    spans = [s for s in cap.spans() if (s.attributes or {}).get("gen_ai.request.model") != "big"]
    only_small.write_text(json.dumps(encode_request(spans)) + "\n")
    assert main(["profile", str(only_small)]) == 2
    err = capsys.readouterr().err
    assert "no model call with token counts" in err
    assert '2 streamed without them: stream_options={"include_usage": True}' in err
