"""What is read from a span besides its kind: whether it roots a run and the run's name; a
model call's model, provider, token counts and time to first token."""

from __future__ import annotations

import math

import pytest

from chainlat._core.conventions import (
    call_readings,
    input_tokens_of,
    is_run_root,
    model_of,
    output_tokens_of,
    provider_of,
    ttft_ms_of,
    workflow_name_of,
)
from support.convention_samples import (
    GENAI_AGENT,
    GENAI_CHAT,
    GENAI_WORKFLOW,
    HTTP_CLIENT,
    LS_CHAIN,
    OI_CHAIN,
    OI_LLM,
    PAI_AGENT_RUN,
    TL_AGENT,
    TL_WORKFLOW,
)

# --- run roots and their names --------------------------------------------------------------------


def test_a_workflow_span_is_a_run_root_at_any_depth() -> None:
    assert is_run_root(GENAI_WORKFLOW, "invoke_workflow support-chat", top_level=False)


def test_a_top_level_openinference_chain_is_a_run_root() -> None:
    assert is_run_root(OI_CHAIN, "LangGraph", top_level=True)


def test_a_nested_openinference_chain_is_no_run_root() -> None:
    assert not is_run_root(OI_CHAIN, "RunnableSequence", top_level=False)


def test_a_top_level_langsmith_chain_is_a_run_root() -> None:
    assert is_run_root(LS_CHAIN, "RunnableSequence", top_level=True)


def test_a_top_level_model_call_is_no_run_root() -> None:
    assert not is_run_root(OI_LLM, "ChatOpenAI", top_level=True)


def test_the_workflow_name_attribute_names_the_run() -> None:
    assert workflow_name_of(GENAI_WORKFLOW, "invoke_workflow something-else") == "support-chat"


def test_the_agent_name_names_an_agent_run() -> None:
    assert workflow_name_of(GENAI_AGENT, "invoke_agent triage") == "triage"


def test_a_traceloop_agent_is_named_by_its_entity_not_the_enclosing_workflow() -> None:
    assert workflow_name_of(TL_AGENT, "researcher.agent") == "researcher"


def test_a_traceloop_workflow_is_named_by_its_entity() -> None:
    assert workflow_name_of(TL_WORKFLOW, "pipeline.workflow") == "pipeline"


def test_a_pydantic_ai_version_2_run_is_named_by_its_agent() -> None:
    attributes = {k: v for k, v in PAI_AGENT_RUN.items() if k != "gen_ai.agent.name"}
    assert workflow_name_of(attributes, "agent run") == "support_agent"


def test_without_a_name_attribute_the_invoke_prefix_is_removed() -> None:
    assert workflow_name_of({}, "invoke_agent triage") == "triage"


def test_without_a_name_attribute_a_chain_is_named_by_its_span() -> None:
    assert workflow_name_of(OI_CHAIN, "LangGraph") == "LangGraph"


def test_a_bare_prefix_is_kept_as_the_name() -> None:
    assert workflow_name_of({}, "invoke_workflow") == "invoke_workflow"


# --- model calls: model, provider, tokens, time to first token ------------------------------------


def test_the_response_model_wins_over_the_request_model() -> None:
    assert model_of(GENAI_CHAT) == "gpt-4o-mini-2024-07-18"


def test_the_new_provider_attribute_wins_over_the_old_one() -> None:
    assert provider_of({"gen_ai.provider.name": "azure.ai.openai", "gen_ai.system": "az"}) == (
        "azure.ai.openai"
    )


def test_no_model_is_none() -> None:
    assert model_of(HTTP_CLIENT) is None


def test_tokens_from_the_genai_attributes() -> None:
    assert (input_tokens_of(GENAI_CHAT), output_tokens_of(GENAI_CHAT)) == (120, 30)


def test_tokens_from_digit_strings() -> None:
    """OTLP JSON writes 64-bit integers as strings."""
    attributes = {"gen_ai.usage.input_tokens": "120", "gen_ai.usage.output_tokens": "30"}
    assert (input_tokens_of(attributes), output_tokens_of(attributes)) == (120, 30)


def test_a_bool_is_not_a_token_count() -> None:
    assert input_tokens_of({"gen_ai.usage.input_tokens": True}) is None


@pytest.mark.parametrize("value", [-1, "-1", "1.5", " 12", "", "١٢", 1.5, math.nan, None])
def test_a_value_that_is_no_count_is_no_token_count(value: object) -> None:
    assert output_tokens_of({"gen_ai.usage.output_tokens": value}) is None


def test_a_whole_float_is_a_token_count() -> None:
    assert input_tokens_of({"llm.token_count.prompt": 12.0}) == 12


def test_a_bad_new_count_gives_way_to_an_old_one() -> None:
    attributes = {"gen_ai.usage.input_tokens": "n/a", "gen_ai.usage.prompt_tokens": 7}
    assert input_tokens_of(attributes) == 7


@pytest.mark.parametrize(
    ("attributes", "tokens"),
    [
        # The OpenAI Agents SDK's streamed call that asked for no usage, as OpenInference
        # and Logfire write it: a usage of nothing is no usage.
        ({"gen_ai.usage.input_tokens": 0, "gen_ai.usage.output_tokens": 0}, (None, None)),
        ({"llm.token_count.prompt": "0", "llm.token_count.completion": "0"}, (None, None)),
        # A later key's count is read past a first key's 0.
        ({"gen_ai.usage.input_tokens": 0, "gen_ai.usage.prompt_tokens": 7}, (7, None)),
        # An answer of nothing to a counted prompt is a count (a filtered answer).
        ({"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 0}, (12, 0)),
        ({"gen_ai.usage.input_tokens": 0, "gen_ai.usage.output_tokens": 5}, (None, 5)),
        ({"gen_ai.usage.output_tokens": 0}, (None, None)),
    ],
)
def test_no_model_call_reads_nothing(
    attributes: dict[str, object], tokens: tuple[int | None, int | None]
) -> None:
    """docs/attributes.md, rule 21: 0 input tokens is no count, and 0 output tokens beside
    no input count is none either; the readers of records and the single readings agree."""
    assert (input_tokens_of(attributes), output_tokens_of(attributes)) == tokens
    assert call_readings({"gen_ai.request.model": "m", **attributes})[:2] == tokens


def test_ttft_in_seconds_becomes_milliseconds() -> None:
    assert ttft_ms_of(GENAI_CHAT) == pytest.approx(250.0)


def test_chainlat_ttft_in_milliseconds_wins() -> None:
    attributes = {"chainlat.latency.ttft_ms": 180.5, "gen_ai.response.time_to_first_chunk": 0.25}
    assert ttft_ms_of(attributes) == 180.5


def test_ttft_from_a_numeric_string() -> None:
    assert ttft_ms_of({"gen_ai.response.time_to_first_chunk": "0.5"}) == pytest.approx(500.0)


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, -0.1, "NaN", "Infinity", "-1", True, "fast", None]
)
def test_a_ttft_that_is_not_finite_and_non_negative_is_rejected(value: object) -> None:
    assert ttft_ms_of({"gen_ai.response.time_to_first_chunk": value}) is None
    assert ttft_ms_of({"chainlat.latency.ttft_ms": value}) is None


def test_a_rejected_chainlat_ttft_gives_way_to_the_genai_one() -> None:
    attributes = {"chainlat.latency.ttft_ms": math.nan, "gen_ai.response.time_to_first_chunk": 0.1}
    assert ttft_ms_of(attributes) == pytest.approx(100.0)


def test_a_time_to_first_token_no_clock_could_hold_is_not_read() -> None:
    """1.8e299 s in nanoseconds is infinite: the rollup could not place the instant."""
    from chainlat._core.conventions import ttft_ms_of

    assert ttft_ms_of({"gen_ai.response.time_to_first_chunk": 1.7976931348623156e299}) is None
    assert ttft_ms_of({"chainlat.latency.ttft_ms": 2e12}) is None
    assert ttft_ms_of({"chainlat.latency.ttft_ms": 250.0}) == 250.0
