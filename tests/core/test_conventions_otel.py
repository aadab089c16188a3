"""chainlat's own step kind and the OpenTelemetry conventions: the GenAI operations, database
and HTTP client spans, and the values no convention knows, classified."""

from __future__ import annotations

import pytest

from chainlat._core.conventions import (
    classify,
)
from support.convention_samples import (
    DB_NEW,
    DB_OLD,
    GENAI_AGENT,
    GENAI_CHAT,
    GENAI_CREATE_AGENT,
    GENAI_EMBEDDINGS,
    GENAI_FETCH_RESPONSE,
    GENAI_PLAN,
    GENAI_RETRIEVAL,
    GENAI_SEARCH_MEMORY,
    GENAI_TOOL,
    GENAI_WORKFLOW,
    HTTP_CLIENT,
    HTTP_CLIENT_OLD,
    HTTP_CLIENT_OTHER_ROUTE,
)

# --- chainlat and the GenAI conventions ------------------------------------------------


def test_chainlat_own_kind_wins_over_every_other_convention() -> None:
    attributes = {
        "chainlat.step.kind": "tool",
        "gen_ai.operation.name": "chat",
        "openinference.span.kind": "LLM",
        "db.system": "redis",
    }
    assert classify(attributes) == "tool"


def test_an_unknown_chainlat_kind_falls_through_to_the_operation() -> None:
    assert classify({"chainlat.step.kind": "bogus", "gen_ai.operation.name": "chat"}) == "inference"


def test_a_chainlat_workflow_span_is_a_workflow() -> None:
    assert classify({"chainlat.step.kind": "workflow"}) == "workflow"


@pytest.mark.parametrize(
    "operation", ["chat", "text_completion", "generate_content", "embeddings", "fetch_response"]
)
def test_genai_model_operations_are_inference(operation: str) -> None:
    assert classify({"gen_ai.operation.name": operation}) == "inference"


def test_genai_chat_span_is_inference() -> None:
    assert classify(GENAI_CHAT) == "inference"


def test_genai_embeddings_span_is_inference() -> None:
    assert classify(GENAI_EMBEDDINGS) == "inference"


def test_genai_retrieval_span_is_data() -> None:
    assert classify(GENAI_RETRIEVAL) == "data"


def test_genai_memory_search_is_data() -> None:
    assert classify(GENAI_SEARCH_MEMORY) == "data"


def test_genai_tool_span_is_a_tool() -> None:
    assert classify(GENAI_TOOL) == "tool"


def test_genai_invoke_workflow_is_a_workflow() -> None:
    assert classify(GENAI_WORKFLOW) == "workflow"


def test_genai_invoke_agent_is_a_workflow() -> None:
    assert classify(GENAI_AGENT) == "workflow"


def test_genai_plan_is_transparent() -> None:
    """The model call under the plan span is the step."""
    assert classify(GENAI_PLAN) is None


def test_genai_create_agent_is_transparent() -> None:
    assert classify(GENAI_CREATE_AGENT) is None


def test_genai_fetch_response_is_inference() -> None:
    assert classify(GENAI_FETCH_RESPONSE) == "inference"


# --- databases and the unknown -------------------------------------------------------------------


def test_a_database_span_by_the_new_attribute_is_data() -> None:
    assert classify(DB_NEW) == "data"


def test_a_database_span_by_the_old_attribute_is_data() -> None:
    assert classify(DB_OLD) == "data"


def test_an_http_client_span_to_a_model_route_is_a_model_call() -> None:
    """Any language's HTTP instrumentation: its POST to a model route is the call's wire span."""
    assert classify(HTTP_CLIENT) == "inference"
    assert classify(HTTP_CLIENT_OLD) == "inference"


def test_an_http_client_span_to_another_route_is_transparent() -> None:
    assert classify(HTTP_CLIENT_OTHER_ROUTE) is None


def test_an_unknown_operation_is_transparent() -> None:
    assert classify({"gen_ai.operation.name": "something_new"}) is None


def test_an_unknown_openinference_kind_is_transparent() -> None:
    assert classify({"openinference.span.kind": "SOMETHING_NEW"}) is None


@pytest.mark.parametrize(
    "key", ["chainlat.step.kind", "gen_ai.operation.name", "openinference.span.kind"]
)
def test_a_non_string_kind_value_is_ignored(key: str) -> None:
    assert classify({key: ["chat"]}) is None


def test_no_attributes_is_transparent() -> None:
    assert classify({}) is None
