"""What every interop agent shares: the task, the steps' own latencies, the case, tracing.

The agent, written once per framework (``<stack>.py``) and once with chainlat alone
(``reference.py``), answers one support question in five steps:

1. retrieve: a keyword search over an in-memory SQLite FTS5 index, plus a fixed
   ``RETRIEVE_MS`` standing in for a remote index (a data stage);
2. plan: a model call offered the ``lookup_order`` tool; the model asks for it, the tool
   runs (``TOOL_MS``), and a second model call reads its result;
3. two model calls in parallel (a summary and a policy check);
4. the answer, streamed.

That is 5 model calls, 1 data stage and 1 tool in every stack. The models' latencies come
from ``PROFILES`` (served by ``chainlat sim`` with jitter 0 and no per-input-token cost,
so a framework's extra prompt text cannot move them).

An agent script is run as ``python -P agents/<stack>.py --traces FILE --base-url URL
[--wrapped] [--httpx]``. The scripts are named after the packages they drive, so their
folder must never be on ``sys.path`` (``-P``; a module there would even shadow a namespace
package such as ``traceloop``), and this module lives one folder up. A script runs its
agent once as a warm-up (imports, connection pools) with its spans dropped, then
`RECORDED_RUNS` times with its spans written to FILE.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter

PLAN_MODEL = "sim-plan"
FAST_MODEL = "sim-fast"
ANSWER_MODEL = "sim-answer"

PROFILES = {
    "models": {
        # 90 ms to the first token, then 19 x 1 = 19 ms for a text answer; a tool call's
        # arguments (a few tokens) take a few ms, so a framework's other argument word
        # moves the call by about 1 ms.
        PLAN_MODEL: {"ttft_base_ms": 90, "decode_ms_per_token": 1, "output_tokens": 20},
        # 50 + 19 x 1 = 69 ms, two at once (4 slots: no queueing).
        FAST_MODEL: {"ttft_base_ms": 50, "decode_ms_per_token": 1, "output_tokens": 20},
        # 40 ms to the first token, then 19 x 4 = 76 ms of streaming.
        ANSWER_MODEL: {"ttft_base_ms": 40, "decode_ms_per_token": 4, "output_tokens": 20},
    }
}
"""``chainlat sim --profiles`` (JSON): slots 4 and jitter 0 are the defaults."""

MAX_TOOL_ROUNDS = 3
"""A model that keeps asking for tools is cut off after this many rounds."""
RETRIEVE_MS = 30.0
TOOL_MS = 25.0

QUESTION = "Where is my order A-1042, and can I still return it?"
SYSTEM = "You are a support agent. Use the tools when an order number is mentioned."
TOOL_NAME = "lookup_order"
TOOL_DESCRIPTION = "Look up an order's status by its id."
TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "description": "The order id."}},
    "required": ["order_id"],
}
OPENAI_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": TOOL_PARAMETERS,
    },
}
SUMMARY_PROMPT = "Summarise the order status in one sentence: "
POLICY_PROMPT = "Say whether the return policy allows a return now: "
ANSWER_PROMPT = "Write the answer to the customer from these notes: "

_DOCS = (
    ("returns", "Orders can be returned within 30 days of delivery for a full refund."),
    ("shipping", "Orders ship within two days; tracking is sent by email."),
    ("order status", "The order status page shows where an order is and when it arrives."),
    ("warranty", "Devices carry a two year warranty against defects."),
)


INTERVALS: list[dict[str, Any]] = []
"""The steps' own functions' intervals (``kind``, ``start_ns``, ``end_ns``, on the spans'
clock), written next to the traces (`intervals_path`): what a framework's span around
the function holds beyond it is the framework's work, measured, not the step's."""


@contextlib.contextmanager
def own_interval(kind: str) -> Iterator[None]:
    """Record the interval of the step's own function (``data`` or ``tool``)."""
    start = time.time_ns()
    try:
        yield
    finally:
        INTERVALS.append({"kind": kind, "start_ns": start, "end_ns": time.time_ns()})


def intervals_path(traces: str) -> str:
    """Where the agent writes `INTERVALS`: beside its traces file."""
    return traces + ".intervals.json"


class Index:
    """A tiny keyword index: SQLite FTS5 in memory."""

    def __init__(self) -> None:
        # check_same_thread: frameworks may call the retriever from a worker thread.
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body)")
        self._db.executemany("INSERT INTO docs VALUES (?, ?)", _DOCS)

    def search(self, query: str, k: int = 2) -> list[str]:
        """The ``k`` best documents for the words of ``query``, after ``RETRIEVE_MS``."""
        with own_interval("data"):
            time.sleep(RETRIEVE_MS / 1000)
            words = " OR ".join(w for w in _words(query) if len(w) > 3)
            rows = self._db.execute(
                "SELECT body FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?", (words, k)
            ).fetchall()
        return [str(body) for (body,) in rows]


def _words(text: str) -> list[str]:
    return ["".join(c for c in w if c.isalnum()) for w in text.lower().split()]


INDEX = Index()


def lookup_order(order_id: str) -> str:
    """The order's status, after ``TOOL_MS`` (a slow internal API)."""
    with own_interval("tool"):
        time.sleep(TOOL_MS / 1000)
    return json.dumps({"order_id": order_id, "status": "shipped", "delivered_days_ago": 3})


def order_id_of(arguments: str | None) -> str:
    """The ``order_id`` of a tool call's JSON arguments (``A-1042`` when there is none)."""
    try:
        value = json.loads(arguments or "{}").get("order_id", "A-1042")
    except (ValueError, AttributeError):
        value = "A-1042"
    return str(value)


def plan_prompt(docs: Sequence[str]) -> str:
    """The user message of the planning call: the question and the retrieved documents."""
    return QUESTION + "\n\nDocuments:\n" + "\n".join(docs)


@dataclass(frozen=True, slots=True)
class Case:
    """One run of an agent script, from its command line."""

    traces: str
    base_url: str
    """The sim's OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
    wrapped: bool
    """Inside ``chainlat.workflow("agent")``."""
    httpx: bool
    """With ``chainlat.instrument_httpx()``."""
    paced: bool = False
    """Each recorded run when ``run.py`` says so (`run_recorded`)."""


def parse_case(argv: Sequence[str] | None = None) -> Case:
    """The case from the command line; call it first, before importing a framework."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--wrapped", action="store_true")
    parser.add_argument("--httpx", action="store_true")
    parser.add_argument("--paced", action="store_true")
    args = parser.parse_args(argv)
    case = Case(args.traces, args.base_url, args.wrapped, args.httpx, args.paced)
    if case.httpx:
        # Before any framework is imported: clients created earlier are left alone.
        chainlat.instrument_httpx()
    return case


class GatedExporter(SpanExporter):
    """Writes to the traces file only the spans that started after `open()`: the warm-up
    is not kept, not even a span of it that a framework ends later, from a thread of its
    own (LiteLLM's streamed call), after the recorded runs began."""

    def __init__(self, path: str) -> None:
        self._file = JsonLinesSpanExporter(path)
        self._opened: int | None = None

    def open(self) -> None:
        """Keep the spans that start from now on (on the SDK's clock, `time.time_ns`)."""
        self._opened = time.time_ns()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        opened = self._opened
        if opened is None:
            return SpanExportResult.SUCCESS
        kept = [span for span in spans if (span.start_time or 0) >= opened]
        return self._file.export(kept) if kept else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._file.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._file.force_flush(timeout_millis)


def tracer_provider(stack: str) -> TracerProvider:
    """A fresh SDK provider for the stack (not yet global: see `install`)."""
    return TracerProvider(resource=Resource.create({"service.name": f"interop-{stack}"}))


def install(case: Case, provider: TracerProvider, *, set_global: bool = True) -> GatedExporter:
    """Make ``provider`` the global one, with chainlat's processor and the gated file export.

    ``set_global=False`` for a framework that made its provider global itself.
    """
    if set_global:
        trace.set_tracer_provider(provider)
    exporter = GatedExporter(case.traces)
    # batch=False: a span is written when it ends, so the warm-up's spans are dropped
    # and the measured run's are all in the file by the time the script exits.
    chainlat.configure(tracer_provider=provider, exporter=exporter, batch=False)
    return exporter


@contextlib.contextmanager
def maybe_workflow(case: Case) -> Iterator[None]:
    """``chainlat.workflow("agent")`` in the wrapped cases, nothing otherwise."""
    if case.wrapped:
        with chainlat.workflow("agent"):
            yield
    else:
        yield


@contextlib.contextmanager
def app_span(name: str = "agent") -> Iterator[None]:
    """The application's own root span (a request handler's), for frameworks without one."""
    with trace.get_tracer("interop-app").start_as_current_span(name):
        yield


def chainlat_retrieve() -> list[str]:
    """The retrieval as chainlat's data stage, for frameworks without a retriever."""
    with chainlat.data_stage("retrieve", source="faq-index"):
        return INDEX.search(QUESTION)


def chainlat_tool(order_id: str) -> str:
    """The tool as chainlat's tool step, for frameworks without tools."""
    with chainlat.tool(TOOL_NAME):
        return lookup_order(order_id)


def plain_openai_agent(
    create: Callable[..., Any],
    *,
    model_prefix: str = "",
    retrieve: Callable[[], list[str]] = chainlat_retrieve,
    run_tool: Callable[[str], str] = chainlat_tool,
) -> None:
    """The agent written against an OpenAI-style ``create`` alone, with its own tool loop.

    ``create``: ``client.chat.completions.create`` of an ``openai.OpenAI`` (or LiteLLM's
    ``completion``, with ``model_prefix="openai/"``). The steps that are not model calls
    are chainlat's unless the framework brings its own (``retrieve``, ``run_tool``).
    """
    docs = retrieve()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": plan_prompt(docs)},
    ]
    for _round in range(MAX_TOOL_ROUNDS):
        reply = create(model=model_prefix + PLAN_MODEL, messages=messages, tools=[OPENAI_TOOL])
        message = reply.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = run_tool(order_id_of(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    notes = str(message.content or "")

    def ask(prompt: str) -> str:
        messages = [{"role": "user", "content": prompt + notes}]
        reply = create(model=model_prefix + FAST_MODEL, messages=messages)
        return str(reply.choices[0].message.content or "")

    with ThreadPoolExecutor(2) as pool:
        # bind_context: the OpenTelemetry context too, so the calls keep their parent.
        summary, policy = pool.map(chainlat.bind_context(ask), (SUMMARY_PROMPT, POLICY_PROMPT))
    stream = create(
        model=model_prefix + ANSWER_MODEL,
        messages=[{"role": "user", "content": ANSWER_PROMPT + summary + policy}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for _chunk in stream:
        pass


RECORDED_RUNS = 5
"""Runs kept per case: the matrix compares the median of each quantity, which a busy
machine's scheduling noise moves far less than it moves one run."""

READY = "@@chainlat-interop ready"
DONE = "@@chainlat-interop done"


def _orders(case: Case) -> Iterator[None]:
    """One item per recorded run. Paced (``--paced``): the script says `READY` after its
    warm-up, then runs once for each ``run`` line on its standard input, saying `DONE`
    after each, until ``stop`` (or the end of its input). ``run.py`` alternates two
    scripts this way, the reference's runs and a case's, so a burst of load on the
    machine lands on both. Otherwise `RECORDED_RUNS` runs."""
    if not case.paced:
        yield from [None] * RECORDED_RUNS
        return
    print(READY, flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        yield None
        print(DONE, flush=True)


def _finish(case: Case, drain: Callable[[], None] | None) -> None:
    if drain is not None:
        drain()
    chainlat.shutdown()
    with open(intervals_path(case.traces), "w") as file:
        json.dump(INTERVALS, file)


def run_recorded(
    case: Case, exporter: GatedExporter, agent: Any, drain: Callable[[], None] | None = None
) -> None:
    """Run ``agent()`` once as a warm-up, then recorded (`_orders`).

    ``drain``: called before the spans are flushed at exit, for a framework that writes
    spans later, from threads of its own.
    """
    with maybe_workflow(case):
        agent()
    exporter.open()
    INTERVALS.clear()
    for _ in _orders(case):
        with maybe_workflow(case):
            agent()
    _finish(case, drain)


async def run_recorded_async(case: Case, exporter: GatedExporter, agent: Any) -> None:
    """`run_recorded` for a coroutine function, all runs on one event loop (the
    frameworks' async clients keep connections bound to the loop that opened them)."""
    with maybe_workflow(case):
        await agent()
    exporter.open()
    INTERVALS.clear()
    for _ in _orders(case):
        with maybe_workflow(case):
            await agent()
    _finish(case, None)
