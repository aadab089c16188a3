"""The interop agent with CrewAI, traced by openinference-instrumentation-crewai and -openai.

The plan is a one-agent ``Crew``: an ``Agent`` with the ``lookup_order`` tool (CrewAI's
``@tool``) and a ``Task`` whose description is the question and the retrieved documents;
CrewAI runs the loop (native tool calls: the model asks for ``lookup_order``, the tool
runs, the model's text ends the task). The two parallel calls are ``LLM.call`` in two
threads (``chainlat.bind_context``: CrewAI has no fan-out of model calls outside a crew's
tasks), the answer an ``LLM(stream=True)`` call, which reads the stream to its end.
CrewAI has no retriever, so the retrieval is chainlat's data stage; the application's root
span groups the steps.

CrewAI 1.x calls an ``openai/<model>`` with a custom ``base_url`` through its native
OpenAI provider (the openai SDK's chat completions; LiteLLM is not installed), so the
model calls are traced by OpenInference's OpenAI instrumentation, as Arize's CrewAI guide
pairs it with the provider CrewAI routes to; the crew, task and tool spans by OpenInference's
CrewAI instrumentation (``Crew.kickoff``, ``Task._execute_core``, the tool's ``Tool.run``).

CrewAI's own telemetry (anonymous usage spans to its collector, its AMP tracing and the
first-run trace offer, the version check against PyPI) is turned off by its own switches.
``OTEL_SDK_DISABLED`` would turn it off too, but it turns off every OpenTelemetry SDK
provider in the process, the one these traces are written by among them.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent

import chainlat

# Before crewai is imported: nothing leaves 127.0.0.1.
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["CREWAI_DISABLE_VERSION_CHECK"] = "true"


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("crewai")
    exporter = _agent.install(case, provider)

    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool
    from openinference.instrumentation.crewai import CrewAIInstrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    CrewAIInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)

    def llm(model: str, **kwargs: object) -> LLM:
        return LLM(
            model="openai/" + model,
            base_url=case.base_url,
            api_key="sk-interop",
            max_retries=0,
            **kwargs,
        )

    planner = llm(_agent.PLAN_MODEL)
    fast = llm(_agent.FAST_MODEL)
    answerer = llm(_agent.ANSWER_MODEL, stream=True)

    @tool(_agent.TOOL_NAME)
    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id."""
        return _agent.lookup_order(order_id)

    def ask(prompt: str) -> str:
        return str(fast.call([{"role": "user", "content": prompt}]))

    def agent() -> None:
        # Made per run, as a request handler would: a crew keeps its tasks' outputs.
        support = Agent(
            role="Support agent",
            goal="Answer the customer's question about their order.",
            backstory=_agent.SYSTEM,
            tools=[lookup_order],
            llm=planner,
            max_iter=_agent.MAX_TOOL_ROUNDS,
            allow_delegation=False,
            verbose=False,
        )
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            task = Task(
                description=_agent.plan_prompt(docs),
                expected_output="Notes for the answer.",
                agent=support,
            )
            notes = str(Crew(agents=[support], tasks=[task], verbose=False).kickoff())
            with ThreadPoolExecutor(2) as pool:
                summary, policy = pool.map(
                    chainlat.bind_context(ask),
                    (_agent.SUMMARY_PROMPT + notes, _agent.POLICY_PROMPT + notes),
                )
            prompt = _agent.ANSWER_PROMPT + summary + policy
            answerer.call([{"role": "user", "content": prompt}])

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
