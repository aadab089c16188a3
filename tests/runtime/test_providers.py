"""configure() with providers the user or another library brings: chainlat's spans go there,
nothing is exported twice, and a run without a rollup says why."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chainlat


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp, exporter
    chainlat.shutdown()
    tp.shutdown()


def test_spans_go_to_the_provider_given_to_configure_even_when_it_is_not_global(
    provider: tuple[TracerProvider, InMemorySpanExporter],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    tp, exporter = provider
    assert trace.get_tracer_provider() is not tp
    chainlat.configure("svc", tracer_provider=tp)
    with chainlat.workflow("w") as run:
        with chainlat.inference("m"):
            pass
    assert run.rollup is not None and run.rollup.inference_count == 1
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "chat m",
        "invoke_workflow w",
    ]
    assert list(tmp_path.iterdir()) == []  # no stray chainlat-traces.jsonl


def test_a_provider_the_user_brings_gets_no_exporter_unless_asked(
    provider: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    tp, _ = provider
    before = len(tp._active_span_processor._span_processors)
    chainlat.configure("svc", tracer_provider=tp)
    after = tp._active_span_processor._span_processors
    assert len(after) == before + 1  # chainlat's span processor, no exporter
    assert type(after[-1]).__name__ == "ChainlatSpanProcessor"
    chainlat.configure("svc", tracer_provider=tp, exporter="file", traces_file=tmp_path / "t.jsonl")
    with chainlat.workflow("w", tracer_provider=tp):
        pass
    assert chainlat.shutdown()
    assert (tmp_path / "t.jsonl").read_text().count("invoke_workflow w") == 1


@pytest.mark.usefixtures("fresh_warnings")
def test_a_workflow_without_a_rollup_says_why_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="chainlat")
    for _ in range(3):
        with chainlat.workflow("w", tracer_provider=trace.NoOpTracerProvider()) as run:
            pass
        assert run.rollup is None
    warnings = [r.getMessage() for r in caplog.records if "has no rollup" in r.getMessage()]
    assert len(warnings) == 1
    assert "NoOpTracerProvider" in warnings[0]
    assert "chainlat.configure()" in warnings[0]


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


_ONE_RUN = """
    with chainlat.workflow("w") as run:
        with trace.get_tracer("framework").start_as_current_span(
            "llm", attributes={"openinference.span.kind": "LLM"}
        ):
            pass
    chainlat.shutdown()
    print(run.rollup.inference_count, sorted(s.name for s in exporter.get_finished_spans()))
"""
"""A workflow with a framework's model call in it, then the rollup's count and the spans
exported, for the tests below that each set up a provider first (``exporter``)."""


def test_configure_joins_a_global_provider_another_library_set_up(tmp_path: Path) -> None:
    """As after Traceloop.init() or logfire.configure(): one provider, spans exported once."""
    setup = """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import chainlat

    exporter = InMemorySpanExporter()
    theirs = TracerProvider()
    theirs.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(theirs)
    assert chainlat.configure("svc") is theirs
"""
    done = _run(setup + _ONE_RUN, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 ['invoke_workflow w', 'llm']"
    assert "Overriding of current TracerProvider" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_configure_names_what_to_do_when_the_global_provider_takes_no_processor(
    tmp_path: Path,
) -> None:
    done = _run(
        """
        from opentelemetry import trace
        import chainlat

        class Wrapper(trace.TracerProvider):
            def get_tracer(self, *args, **kwargs):
                return trace.NoOpTracer()

        trace.set_tracer_provider(Wrapper())
        try:
            chainlat.configure("svc")
        except chainlat.ConfigError as exc:
            print(exc)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Wrapper, which takes no span processor" in done.stdout
    assert "configure(tracer_provider=...)" in done.stdout


_UNHASHABLE_WRAPPER = """
    import dataclasses
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import chainlat

    @dataclasses.dataclass  # eq=True and no __hash__, as Logfire's ProxyTracerProvider
    class Wrapper(trace.TracerProvider):
        provider: TracerProvider

        def get_tracer(self, *args, **kwargs):
            return self.provider.get_tracer(*args, **kwargs)

        def add_span_processor(self, processor):
            added.append(type(processor).__name__)
            self.provider.add_span_processor(processor)

    added = []
    exporter = InMemorySpanExporter()
    inner = TracerProvider()
    inner.add_span_processor(SimpleSpanProcessor(exporter))
    wrapper = Wrapper(inner)
"""


@pytest.mark.parametrize(
    "joined",
    [
        pytest.param("chainlat.configure('svc', tracer_provider=wrapper)", id="given"),
        pytest.param("chainlat.configure('svc')", id="global"),
    ],
)
def test_configure_joins_a_provider_that_cannot_be_hashed(joined: str, tmp_path: Path) -> None:
    """Logfire's provider is a dataclass, unhashable: configure() raised TypeError on it."""
    # Global, as logfire.configure() makes its provider.
    setup = f"\n    trace.set_tracer_provider(wrapper)\n    {joined}\n"
    done = _run(_UNHASHABLE_WRAPPER + setup + _ONE_RUN, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 ['invoke_workflow w', 'llm']"


def test_a_step_started_before_configure_adds_the_processor_to_an_unhashable_provider(
    tmp_path: Path,
) -> None:
    """Without configure(), the first step adds chainlat's processor to the global provider:
    once, however many steps follow."""
    done = _run(
        _UNHASHABLE_WRAPPER
        + """
    trace.set_tracer_provider(wrapper)
    for _ in range(3):
        with chainlat.workflow("w") as run:
            with chainlat.inference("m"):
                pass
    print(run.rollup.inference_count, added.count("ChainlatSpanProcessor"))
    """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 1"
