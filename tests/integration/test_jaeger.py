"""Jaeger v2 as configured by collector/jaeger.yaml: up, queryable, storing OTLP."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import httpx
import pytest

from .otlp import attribute_map, jaeger_trace_ids, jaeger_trace_v3, send, wait_for, workflow_trace
from .stack import Jaeger

pytestmark = pytest.mark.integration


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as c:
        yield c


def test_health_endpoint_reports_ok(jaeger: Jaeger, client: httpx.Client) -> None:
    response = client.get(jaeger.health_url)
    assert response.status_code == 200, response.text


def test_v1_services_api_answers(jaeger: Jaeger, client: httpx.Client) -> None:
    response = client.get(f"{jaeger.query_url}/api/services")
    assert response.status_code == 200
    assert isinstance(response.json()["data"], list | None)


def test_v3_services_api_answers(jaeger: Jaeger, client: httpx.Client) -> None:
    response = client.get(f"{jaeger.query_url}/api/v3/services")
    assert response.status_code == 200
    assert isinstance(response.json().get("services", []), list)


def test_ui_path_serves_a_page(jaeger: Jaeger, client: httpx.Client) -> None:
    """The source build serves a placeholder page at / (no UI assets are compiled in)."""
    response = client.get(f"{jaeger.query_url}/")
    assert response.status_code == 200
    assert "<html" in response.text.lower()


def test_otlp_trace_sent_to_jaeger_is_queryable(jaeger: Jaeger, client: httpx.Client) -> None:
    """A trace posted as OTLP/JSON shows up in the v1 search, v3 lookup and services."""
    service = f"chainlat-it-{uuid.uuid4().hex[:8]}"
    trace = workflow_trace(random.Random(1), budget_ok=True)
    send(client, jaeger.otlp_http_endpoint, service, [trace])

    spans = wait_for(
        lambda: jaeger_trace_v3(client, jaeger.query_url, trace.trace_id),
        timeout_s=15,
        what="the trace in Jaeger",
    )
    assert {s["name"] for s in spans} == {s.name for s in trace.spans}
    assert jaeger_trace_ids(client, jaeger.query_url, service) == {trace.trace_id}
    v3_services = client.get(f"{jaeger.query_url}/api/v3/services").json()["services"]
    assert service in v3_services
    operations = client.get(
        f"{jaeger.query_url}/api/v3/operations", params={"service": service}
    ).json()["operations"]
    assert {o["name"] for o in operations} == {s.name for s in trace.spans}
    root = next(s for s in spans if s["name"] == "invoke_workflow support-chat")
    assert attribute_map(root)["chainlat.budget.ok"] is True
