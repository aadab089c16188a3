"""chainlat.httpx over real HTTP on 127.0.0.1, against chainlat.sim: the GenAI client metrics
of streamed calls, with the semantic conventions' buckets, and none of streaming for a
whole answer."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, MetricsData

from chainlat._core import attributes as attr
from chainlat.sim import SimServer
from chainlat.testing import Capture
from support.httpx_checks import latency, model_spans
from support.httpx_sim import MESSAGES, TOKENS, openai_client


def histogram(data: MetricsData | None, name: str) -> list[HistogramDataPoint]:
    assert data is not None
    points: list[HistogramDataPoint] = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    points.extend(p for p in metric.data.data_points)  # type: ignore[misc]
    return points


def test_streamed_calls_record_the_genai_client_metrics_with_semconv_buckets(
    sim: SimServer, live: Capture
) -> None:
    with openai_client(sim, live) as client:
        stream = client.chat.completions.create(
            model="sim-test", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        for _ in stream:
            pass
    data = live.metric_reader.get_metrics_data()
    [duration] = histogram(data, attr.METRIC_OPERATION_DURATION)
    [first] = histogram(data, attr.METRIC_TIME_TO_FIRST_CHUNK)
    [per_chunk] = histogram(data, attr.METRIC_TIME_PER_OUTPUT_CHUNK)
    tokens = histogram(data, attr.METRIC_TOKEN_USAGE)
    assert duration.count == first.count == 1
    assert per_chunk.count == TOKENS - 1
    assert tuple(per_chunk.explicit_bounds) == attr.DURATION_BUCKETS_S
    assert tuple(first.explicit_bounds) == attr.DURATION_BUCKETS_S
    # The gaps between chunks add up to the generation time on the span.
    [span] = model_spans(live.spans())
    assert per_chunk.sum == pytest.approx(latency(span)["generation"] / 1000, abs=1e-9)
    assert first.sum == pytest.approx(latency(span)["ttft"] / 1000, abs=1e-9)
    assert {dict(p.attributes or {}).get(attr.GEN_AI_TOKEN_TYPE) for p in tokens} == {
        "input",
        "output",
    }
    labels = dict(per_chunk.attributes or {})
    assert labels[attr.GEN_AI_REQUEST_MODEL] == "sim-test"
    assert labels[attr.SERVER_PORT] == sim.port


def test_a_whole_answer_records_no_streaming_metrics(sim: SimServer, live: Capture) -> None:
    with openai_client(sim, live) as client:
        client.chat.completions.create(model="sim-test", messages=MESSAGES)
    data = live.metric_reader.get_metrics_data()
    assert len(histogram(data, attr.METRIC_OPERATION_DURATION)) == 1
    assert histogram(data, attr.METRIC_TIME_TO_FIRST_CHUNK) == []
    assert histogram(data, attr.METRIC_TIME_PER_OUTPUT_CHUNK) == []
