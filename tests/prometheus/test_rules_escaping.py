"""``chainlat budgets rules`` on hostile names and durations: the file stays one YAML
document of rules, names stay text (never a comment's end, never a template action), and
durations are Prometheus's own; promtool checks a fuzzed set."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlat.cli import main
from support.promtool import check_rules, find_promtool

LIVE_TEMPLATE = '{{ query "up" }}'
HOSTILE_NAMES = [
    "a\nb: 1\ncost_p95: x",
    "new\rline",
    "nel\x85x",
    "ls\u2028x",
    LIVE_TEMPLATE,
    "{{",
    "}}{{ .Value",
    "{{{",
    '"quoted"',
    "back\\slash",
    "# not a comment",
    "tab\tx",
    "nul\x00x",
    "\u202eevil",
    "$labels",
    "- [x]",
]


def _budget_file(tmp_path: Path, workflow: str, step: str = "chat gpt-4o") -> Path:
    """A budget with a limit of every kind, one of them (cost_p95) not expressible."""
    path = tmp_path / "budgets.json"
    path.write_text(
        json.dumps(
            {
                "workflows": {
                    workflow: {
                        "total": "800ms",
                        "cost_p95": 0.01,
                        "p95": {"total": "700ms"},
                        "error_rate": "2%",
                        "steps": {step: {"max": "600ms", "p95": "500ms", "ttft_p95": "1s"}},
                    }
                }
            }
        ),
        encoding="utf-8",
    )
    return path


def _rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], budgets: Path, *options: str
) -> tuple[int, str, str]:
    code = main(["budgets", "rules", str(budgets), *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _expand(template: str) -> str:
    """A Go template holding only literal text and ``{{ "..." }}`` actions, expanded; an
    AssertionError for any other action (one Prometheus would run)."""
    out = re.sub(r'\{\{ "((?:[^"\\]|\\.)*)" \}\}', lambda m: json.loads(f'"{m[1]}"'), template)
    literal = re.sub(r'\{\{ "((?:[^"\\]|\\.)*)" \}\}', "", template)
    assert "{{" not in literal, f"a live template action in {template!r}"
    return out


def _alerts(document: Any) -> list[dict[str, Any]]:
    return [r for g in document["groups"] for r in g["rules"] if "alert" in r]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_workflow_name_stays_in_its_comment_and_its_labels(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _rules(tmp_path, capsys, _budget_file(tmp_path, name))
    assert (code, err) == (0, "")
    document = yaml.safe_load(out)
    assert list(document) == ["groups"]  # the header is comments, and only comments
    header = out[: out.index("groups:")]
    assert all(line.startswith("#") for line in header.splitlines())
    alerts = _alerts(document)
    assert alerts
    for alert in alerts:
        assert _expand(alert["labels"]["workflow"]) == name
        assert name in _expand(alert["annotations"]["summary"])
    recorded = [r for g in document["groups"] for r in g["rules"] if "record" in r]
    assert {r["labels"]["workflow"] for r in recorded} == {name}  # recording rules: not templated


def test_a_live_template_in_a_step_name_is_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _rules(tmp_path, capsys, _budget_file(tmp_path, "chat", step=LIVE_TEMPLATE))
    assert code == 0
    targets = [_expand(a["labels"]["target"]) for a in _alerts(yaml.safe_load(out))]
    assert 'steps."{{ query \\"up\\" }}".max' in targets


@pytest.mark.parametrize(
    "window",
    ["١h", "1٠m", "10000000000000000000000h", "300y", "1.5h", "h", "0s", "1m1h", "1H"],
)
@pytest.mark.parametrize("option", ["--window", "--for", "--evaluation-interval"])
def test_a_duration_prometheus_would_refuse_is_refused_in_one_line(
    option: str, window: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _rules(tmp_path, capsys, _budget_file(tmp_path, "chat"), option, window)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1
    assert "Prometheus" in err or "above 0" in err


@pytest.mark.parametrize("window", ["1h", "90s", "1h30m", "2w", "500ms", "1y2w3d4h5m6s7ms"])
def test_durations_in_prometheus_grammar_are_accepted(
    window: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _rules(tmp_path, capsys, _budget_file(tmp_path, "chat"), "--window", window)
    assert code == 0
    assert f"[{window}]" in out


# --- promtool over a fuzzed set --------------------------------------------------------------

names = st.sampled_from(HOSTILE_NAMES) | st.text(
    st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12
)
durations = st.sampled_from(["1h", "30m", "90s", "1h30m", "١h", "0", "1e3s", "25h", "99999d"]) | (
    st.from_regex(r"\A[0-9]{1,22}(y|w|d|h|m|s|ms)\Z", fullmatch=True)
)


@pytest.fixture(scope="module")
def promtool() -> Path:
    return find_promtool()


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(workflow=names, step=names, window=durations)
def test_promtool_accepts_every_rules_file_chainlat_writes(
    promtool: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    workflow: str,
    step: str,
    window: str,
) -> None:
    """Whatever the names, a file chainlat writes passes ``promtool check rules``; a window
    chainlat accepts, Prometheus accepts."""
    code, out, err = _rules(
        tmp_path,
        capsys,
        _budget_file(tmp_path, workflow, step),
        "--window",
        window,
        "--for",
        window,
    )
    if code != 0:
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        return
    rules = tmp_path / "rules.yml"
    rules.write_text(out, encoding="utf-8")
    done = check_rules(promtool, rules)
    assert done.returncode == 0, (workflow, step, window, done.stdout + done.stderr)
