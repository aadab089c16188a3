"""The anthropic SDK, traced automatically: every model call becomes a span with its breakdown.

Runs against chainlat.sim on 127.0.0.1 (no key, no network): a two-step workflow, one
answer streamed and one not, then prints where each call's time went.

    python examples/anthropic_example.py

Against the real API, drop the simulator and the base_url, set ANTHROPIC_API_KEY, and
call chainlat.configure("my-service") instead of using an in-memory capture.
"""

from __future__ import annotations

import sys

import anthropic

import chainlat
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import capture

PROFILE = ModelProfile("claude-sim", ttft_base_ms=150, decode_ms_per_token=12, output_tokens=30)
PARTS = ("queue", "connect", "send", "wait", "server", "network", "ttft", "generation", "tpot")


def main() -> int:
    with capture() as cap, SimServer([PROFILE], network_delay_ms=30) as sim:
        chainlat.instrument_httpx(tracer_provider=cap.provider)  # before the client is made
        try:
            client = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-local")
            with chainlat.workflow("summarise", tracer_provider=cap.provider) as run:
                with client.messages.stream(
                    model="claude-sim",
                    max_tokens=200,
                    messages=[{"role": "user", "content": "Summarise the report."}],
                ) as stream:
                    summary = "".join(stream.text_stream)
                client.messages.create(
                    model="claude-sim",
                    max_tokens=50,
                    messages=[{"role": "user", "content": f"Title for: {summary}"}],
                )
            client.close()
        finally:
            chainlat.uninstrument_httpx()
        calls = [s for s in cap.spans() if s.name == "chat claude-sim" and s.kind.name == "CLIENT"]

    for span in calls:
        attributes = span.attributes or {}
        found = {
            part: attributes.get(f"chainlat.latency.{part}_ms")
            for part in PARTS
            if f"chainlat.latency.{part}_ms" in attributes
        }
        stream_flag = attributes.get("gen_ai.request.stream")
        print(f"{span.name} (stream={stream_flag}):")
        print("   " + ", ".join(f"{k} {float(v):.1f} ms" for k, v in found.items()))  # type: ignore[arg-type]
    if run.rollup is not None:
        print(
            f"workflow: {run.rollup.total_ms:.0f} ms, {run.rollup.inference_ms:.0f} ms in "
            f"{run.rollup.inference_count} model calls"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
