"""A workflow's rollup is left to the export when nothing reads it as the span ends."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chainlat
import chainlat._runtime.deferred
from chainlat._core.rollup import Rollup, compute_rollup


class _Counted:
    """compute_rollup, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: object, **kwargs: object) -> Rollup:
        self.calls += 1
        return compute_rollup(*args, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _Counted:
    counter = _Counted()
    monkeypatch.setattr(chainlat._runtime.deferred, "compute_rollup", counter)
    return counter


@pytest.fixture(autouse=True)
def _shut_down() -> Iterator[None]:
    yield
    chainlat.shutdown()


def _clock() -> itertools.count[int]:
    return itertools.count(1_000_000_000, 1_000_000)  # each reading 1 ms after the last


def _run(provider: TracerProvider) -> chainlat.WorkflowHandle:
    with chainlat.workflow("w", tracer_provider=provider) as run:
        with chainlat.data_stage("fetch", tracer_provider=provider):
            pass
        with chainlat.inference("m", tracer_provider=provider, user_facing=True) as call:
            call.first_token()
    return run


def _workflow_span(spans: tuple[ReadableSpan, ...]) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == "invoke_workflow w"]
    return span


def _chain(span: ReadableSpan) -> dict[str, object]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("chainlat.chain.")}


def _eager_chain() -> dict[str, object]:
    """The chain attributes of the same run on a provider whose exporter is not chainlat's."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    chainlat.configure(
        "svc",
        tracer_provider=provider,
        set_global=False,
        metric_readers=[],
        clock=_clock().__next__,
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _run(provider)
    return _chain(_workflow_span(exporter.get_finished_spans()))


@pytest.mark.parametrize("batch", [False, True])
def test_the_export_writes_the_rollup_the_workflow_block_did_not_compute(
    counted: _Counted, batch: bool
) -> None:
    exporter = InMemorySpanExporter()
    provider = chainlat.configure(
        "svc",
        exporter=exporter,
        set_global=False,
        metric_readers=[],
        batch=batch,
        clock=_clock().__next__,
    )
    counted.calls = 0
    with chainlat.workflow("w", tracer_provider=provider):
        with chainlat.inference("m", tracer_provider=provider):
            pass
    if batch:
        assert counted.calls == 0  # the block ended without computing it
    provider.force_flush()
    assert counted.calls == 1  # the export computed it, once
    span = _workflow_span(exporter.get_finished_spans())
    assert _chain(span)["chainlat.chain.total_ms"] == 3.0
    assert _chain(span)["chainlat.chain.inference_ms"] == 1.0


def test_exported_chain_attributes_are_those_computed_as_the_span_ends() -> None:
    exporter = InMemorySpanExporter()
    provider = chainlat.configure(
        "svc", exporter=exporter, set_global=False, metric_readers=[], clock=_clock().__next__
    )
    run = _run(provider)
    provider.force_flush()
    exported = _chain(_workflow_span(exporter.get_finished_spans()))
    assert run.rollup is not None
    assert exported == run.rollup.to_attributes() == _eager_chain()
    assert exported["chainlat.chain.first_output_ms"] == 4.0  # the first token, 4 readings in


def test_run_rollup_is_computed_on_first_read_and_shared_with_the_export(
    counted: _Counted,
) -> None:
    exporter = InMemorySpanExporter()
    provider = chainlat.configure("svc", exporter=exporter, set_global=False, metric_readers=[])
    counted.calls = 0
    run = _run(provider)
    assert counted.calls == 0
    rollup = run.rollup
    assert rollup is not None and run.rollup is rollup and counted.calls == 1
    provider.force_flush()
    assert counted.calls == 1
    assert _chain(_workflow_span(exporter.get_finished_spans())) == rollup.to_attributes()


def test_the_file_exporter_writes_the_chain_attributes(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    provider = chainlat.configure(
        "svc", exporter="file", traces_file=path, set_global=False, metric_readers=[]
    )
    run = _run(provider)
    assert chainlat.shutdown()
    found = {}
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if span["name"] == "invoke_workflow w":
                        found = {a["key"]: a["value"] for a in span["attributes"]}
    assert run.rollup is not None
    assert found["chainlat.chain.total_ms"] == {"doubleValue": run.rollup.total_ms}
    assert found["chainlat.chain.step_count"] == {"intValue": "2"}


def test_an_exporter_chainlat_did_not_install_gets_the_rollup_as_the_span_ends(
    counted: _Counted,
) -> None:
    mine = InMemorySpanExporter()
    provider = chainlat.configure(
        "svc", exporter=InMemorySpanExporter(), set_global=False, metric_readers=[]
    )
    provider.add_span_processor(SimpleSpanProcessor(mine))
    counted.calls = 0
    run = _run(provider)
    assert counted.calls == 1  # computed in the block's exit: that exporter reads it at once
    span = _workflow_span(mine.get_finished_spans())
    assert run.rollup is not None and _chain(span) == run.rollup.to_attributes()
