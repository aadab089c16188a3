"""The openai SDK, traced automatically, against chainlat.sim with known injected latencies.

Each call's latency breakdown is compared with what the simulator was told to do
(network 40 ms, 120 ms to the first token, then 15 ms per token for 20 tokens), and the
error of every part is summed up at the end: this is how accurate the breakdown is on
this machine. Nothing leaves 127.0.0.1.

    python examples/openai_example.py            # 20 calls each, streamed and not
    python examples/openai_example.py --calls 50
"""

from __future__ import annotations

import argparse
import statistics
import sys

import openai
from opentelemetry.sdk.trace import ReadableSpan

import chainlat
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import capture

NETWORK_MS, TTFT_MS, DECODE_MS, TOKENS = 40.0, 120.0, 15.0, 20
PROFILE = ModelProfile(
    "sim-demo", ttft_base_ms=TTFT_MS, decode_ms_per_token=DECODE_MS, output_tokens=TOKENS
)
GENERATION_MS = DECODE_MS * (TOKENS - 1)
INJECTED = {
    # part: (injected ms for a whole answer, for a stream); None: not measured there
    "network": (NETWORK_MS, NETWORK_MS),
    "server": (TTFT_MS + GENERATION_MS, 0.0),  # a stream's headers leave at once
    "wait": (NETWORK_MS + TTFT_MS + GENERATION_MS, NETWORK_MS),
    "ttft": (None, NETWORK_MS + TTFT_MS),
    "generation": (None, GENERATION_MS),
    "tpot": (None, DECODE_MS),
}
PREFIX = "chainlat.latency."


def parts(span: ReadableSpan) -> dict[str, float]:
    attributes = span.attributes or {}
    return {
        key[len(PREFIX) : -3]: float(value)  # type: ignore[arg-type]
        for key, value in attributes.items()
        if key.startswith(PREFIX)
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls of each kind (default 20)")
    args = parser.parse_args(argv)

    with capture() as cap, SimServer([PROFILE], network_delay_ms=NETWORK_MS) as sim:
        # Every httpx/httpx2 client created from here on is traced, the SDK's own included.
        chainlat.instrument_httpx(tracer_provider=cap.provider)
        try:
            client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-local")
            messages: list[openai.types.chat.ChatCompletionMessageParam] = [
                {"role": "user", "content": "How late is my answer?"}
            ]
            with chainlat.workflow("demo", tracer_provider=cap.provider) as run:
                for _ in range(args.calls):
                    client.chat.completions.create(model="sim-demo", messages=messages)
                for _ in range(args.calls):
                    stream = client.chat.completions.create(
                        model="sim-demo", messages=messages, stream=True
                    )
                    for _ in stream:
                        pass
            client.close()
        finally:
            chainlat.uninstrument_httpx()
        calls = [s for s in cap.spans() if s.name == "chat sim-demo" and s.kind.name == "CLIENT"]

    rollup = run.rollup
    assert rollup is not None
    print(
        f"{len(calls)} calls in {rollup.total_ms:.0f} ms: {rollup.inference_count} inferences, "
        f"{rollup.inference_ms:.0f} ms inference, {rollup.overhead_ms:.0f} ms overhead\n"
    )
    print("one streamed call:", {k: round(v, 1) for k, v in parts(calls[-1]).items()}, "\n")
    print(f"{'part':<12}{'kind':<8}{'injected':>9}{'mean err':>10}{'p50 err':>9}{'max err':>9}")
    for name, (whole, streamed) in INJECTED.items():
        for kind, expected, spans in (
            ("whole", whole, calls[: args.calls]),
            ("stream", streamed, calls[args.calls :]),
        ):
            if expected is None:
                continue
            errors = [parts(s)[name] - expected for s in spans]
            print(
                f"{name:<12}{kind:<8}{expected:>9.1f}{statistics.fmean(errors):>+10.2f}"
                f"{statistics.median(errors):>+9.2f}{max(errors, key=abs):>+9.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
