"""The interop agent traced by MLflow Tracing, with its OpenAI autologging.

The loop is the reference's (`_agent.plain_openai_agent`), written with MLflow's own
decorator and autologging: the request is an ``@mlflow.trace`` function, the retrieval
one of span type ``RETRIEVER`` and the tool one of span type ``TOOL``, and
``mlflow.openai.autolog()`` traces each call of the openai SDK (span type ``CHAT_MODEL``,
a span event per streamed chunk).

MLflow sends its traces to an OpenTelemetry backend when
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (``mlflow/tracing/provider.py``,
``_get_span_processors``), and writes its spans through the application's global tracer
provider with ``MLFLOW_USE_DEFAULT_TRACER_PROVIDER=false``, so they also reach the
application's file. The backend is a local sink here, which answers every export with 200
(no Jaeger runs beside each agent); ``MLFLOW_TRACKING_URI`` names a server that is never
asked (with the OTLP endpoint set, MLflow sends nothing to it).
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import http.server
import os
import sys
import threading

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent


class _Sink(http.server.BaseHTTPRequestHandler):
    """The OpenTelemetry backend MLflow exports to: every export accepted, none kept."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args) -> None:
        pass


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _agent.install(case, _agent.tracer_provider("mlflow"))
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = (
        f"http://127.0.0.1:{sink.server_address[1]}/v1/traces"
    )
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
    os.environ["MLFLOW_USE_DEFAULT_TRACER_PROVIDER"] = "false"
    os.environ["MLFLOW_TRACKING_URI"] = "http://127.0.0.1:9"

    import mlflow
    import openai
    from mlflow.entities import SpanType

    mlflow.openai.autolog()
    client = openai.OpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve() -> list[str]:
        return _agent.INDEX.search(_agent.QUESTION)

    @mlflow.trace(name=_agent.TOOL_NAME, span_type=SpanType.TOOL)
    def run_tool(order_id: str) -> str:
        return _agent.lookup_order(order_id)

    @mlflow.trace(name="agent", span_type=SpanType.AGENT)
    def agent() -> None:
        _agent.plain_openai_agent(
            client.chat.completions.create, retrieve=retrieve, run_tool=run_tool
        )

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
