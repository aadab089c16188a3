"""The interop agent as a LangGraph graph: the one the LangChain stacks trace, each with
its own instrumentation (``agents/openinference-langchain.py``, ``agents/langsmith-otel.py``).

Every step is LangChain's: a ``BaseRetriever`` over the index, ``ChatOpenAI`` with the tool
bound, LangGraph's ``ToolNode`` running the tool, two nodes of one superstep in parallel
(LangGraph runs them in threads), and an answer node that streams. Imported only once the
stack's instrumentation is set up, as an application imports LangChain at start-up.
"""

# mypy: ignore-errors
# (the framework is installed only in the stacks' environments, not in the dev one)

# No ``from __future__ import annotations``: LangGraph reads the state's annotations at
# run time, and this state is defined in a function.

import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import _agent


def graph(case: _agent.Case) -> Any:
    """The compiled graph of the agent's five steps, its model calls to ``case``'s sim."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import ToolNode

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

    builder = StateGraph(State)
    builder.add_node("retrieve", retrieve)
    builder.add_node("plan", plan)
    builder.add_node("tools", ToolNode([lookup_order]))
    builder.add_node("summary", ask(_agent.SUMMARY_PROMPT))
    builder.add_node("policy", ask(_agent.POLICY_PROMPT))
    builder.add_node("answer", answer)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "plan")
    builder.add_conditional_edges("plan", route, ["tools", "summary", "policy"])
    builder.add_edge("tools", "plan")
    builder.add_edge(["summary", "policy"], "answer")
    builder.add_edge("answer", END)
    return builder.compile()
