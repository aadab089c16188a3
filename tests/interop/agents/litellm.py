"""The interop agent with LiteLLM and its OpenTelemetry callback (``callbacks = ["otel"]``).

LiteLLM's ``completion`` is OpenAI-shaped, so the loop is the reference's
(`_agent.plain_openai_agent`) with ``openai/<model>`` against the sim's ``api_base``;
LiteLLM has no retriever or tool of its own, so those steps are chainlat's. The callback
finds the global SDK provider and adds its spans to it.

LiteLLM logs a streamed call when the stream ends, from a worker thread that does not
carry the caller's OpenTelemetry context: its span lands in a trace of its own, outside
the run (chainlat does not join traces by time: in a service, calls of concurrent
requests overlap). LiteLLM takes an explicit parent from the call's metadata
(``litellm_parent_otel_span``, read first by its OpenTelemetry callback), so the streamed
call passes the current span, as a user of LiteLLM's callback must for streams. That
span is still written after the workflow ends, so the live rollup misses the call; the
readers recompute a run whose trace holds more steps than its recorded rollup counted.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import functools
import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _agent.install(case, _agent.tracer_provider("litellm"))

    # Without it, LiteLLM writes a call's attributes onto the caller's current span (here
    # the application's root) instead of a span of its own; documented for SDK callers.
    os.environ["USE_OTEL_LITELLM_REQUEST_SPAN"] = "true"
    import litellm
    from opentelemetry import trace

    litellm.callbacks = ["otel"]
    complete = functools.partial(
        litellm.completion, api_base=case.base_url, api_key="sk-interop", num_retries=0
    )

    def create(**kwargs):
        if kwargs.get("stream"):
            # The stream is logged off the caller's context: its parent, given explicitly.
            kwargs["metadata"] = {"litellm_parent_otel_span": trace.get_current_span()}
        return complete(**kwargs)

    def agent() -> None:
        with _agent.app_span():
            _agent.plain_openai_agent(create, model_prefix="openai/")

    def drain() -> None:
        # LiteLLM writes a streamed call's span from its logging thread pool, after the
        # stream: wait for it before the script exits, or the last run's call is lost.
        from litellm.litellm_core_utils.thread_pool_executor import executor

        executor.shutdown(wait=True)

    _agent.run_recorded(case, exporter, agent, drain)


if __name__ == "__main__":
    main()
