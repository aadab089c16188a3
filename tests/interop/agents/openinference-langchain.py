"""The interop agent as a LangGraph graph, traced by openinference-instrumentation-langchain.

Every step is LangChain's: a ``BaseRetriever`` over the index (an OpenInference
``RETRIEVER`` span), ``ChatOpenAI`` with the tool bound, LangGraph's ``ToolNode`` running
the tool, two nodes of one superstep in parallel (LangGraph runs them in threads), and an
answer node that streams. The graph's own span is the run's root.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

# No ``from __future__ import annotations``: LangGraph reads the state's annotations at
# run time, and this state is defined in a function, after the httpx instrumentation.

import operator
import os
import sys
from collections.abc import Callable
from typing import Annotated, TypedDict

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("openinference-langchain")
    exporter = _agent.install(case, provider)

    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import ToolNode
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=provider)

    class FaqRetriever(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content=body) for body in _agent.INDEX.search(query)]

    @tool(_agent.TOOL_NAME)
    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id."""
        return _agent.lookup_order(order_id)

    def chat(model: str) -> ChatOpenAI:
        return ChatOpenAI(
            model=model,
            base_url=case.base_url,
            api_key="sk-interop",
            max_retries=0,
            stream_usage=True,
        )

    retriever = FaqRetriever()
    planner = chat(_agent.PLAN_MODEL).bind_tools([lookup_order])
    fast = chat(_agent.FAST_MODEL)
    answerer = chat(_agent.ANSWER_MODEL)

    class State(TypedDict, total=False):
        messages: Annotated[list[AnyMessage], add_messages]
        notes: Annotated[list[str], operator.add]

    def retrieve(state: State) -> State:
        docs = [d.page_content for d in retriever.invoke(_agent.QUESTION)]
        prompt = _agent.plan_prompt(docs)
        return {"messages": [SystemMessage(_agent.SYSTEM), HumanMessage(prompt)]}

    def plan(state: State) -> State:
        return {"messages": [planner.invoke(state["messages"])]}

    def route(state: State) -> str | list[str]:
        if state["messages"][-1].tool_calls:
            return "tools"
        return ["summary", "policy"]

    def ask(prompt: str) -> Callable[[State], State]:
        def node(state: State) -> State:
            reply = fast.invoke(prompt + str(state["messages"][-1].content))
            return {"notes": [str(reply.content)]}

        return node

    def answer(state: State) -> State:
        for _chunk in answerer.stream(_agent.ANSWER_PROMPT + "".join(state["notes"])):
            pass
        return {}

    graph = StateGraph(State)
    graph.add_node("retrieve", retrieve)
    graph.add_node("plan", plan)
    graph.add_node("tools", ToolNode([lookup_order]))
    graph.add_node("summary", ask(_agent.SUMMARY_PROMPT))
    graph.add_node("policy", ask(_agent.POLICY_PROMPT))
    graph.add_node("answer", answer)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "plan")
    graph.add_conditional_edges("plan", route, ["tools", "summary", "policy"])
    graph.add_edge("tools", "plan")
    graph.add_edge(["summary", "policy"], "answer")
    graph.add_edge("answer", END)
    app = graph.compile()

    _agent.run_recorded(case, exporter, lambda: app.invoke({"messages": [], "notes": []}))


if __name__ == "__main__":
    main()
