"""Run ``chainlat demo`` as usual, with a local copy of every span it exports.

    python demo_with_copy.py SERVICE COPY_FILE [demo options...]

The demo exports wherever ``OTEL_EXPORTER_OTLP_ENDPOINT`` says. Before it starts,
this configures chainlat once with the given service name and no exporter, and adds
a processor that appends every span to ``COPY_FILE``. The demo's own configure()
then reuses that provider (the global one is set once per process) and adds its
exporter to it: both destinations receive the same span objects.
"""

from __future__ import annotations

import sys

from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat import demo
from chainlat._runtime.otlp_json import JsonLinesSpanExporter


def main(argv: list[str]) -> int:
    service, copy_file, *demo_args = argv
    provider = chainlat.configure(service, exporter="none")
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(copy_file)))
    code = demo.main(demo_args)
    provider.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
