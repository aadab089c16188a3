// A Node.js application traced with OpenTelemetry JS that knows nothing of chainlat: one
// workflow run (invoke_workflow support) with one model call (chat gpt-4o-mini) at explicit
// times, exported over OTLP/HTTP to wherever the SDK's environment variables point
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces).
//
//   node app.mjs CHAT_MS
//
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL picks the exporter, as the SDK's own set-up does:
// "http/json" (@opentelemetry/exporter-trace-otlp-http) or "http/protobuf", the default
// (@opentelemetry/exporter-trace-otlp-proto). The model call lasts CHAT_MS milliseconds
// from 1 ms after the workflow starts, and the workflow ends 1 ms after it: the run's total
// is CHAT_MS + 2 ms.
import { SpanKind, context, trace } from "@opentelemetry/api";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

const EXPORTERS = {
  "http/json": "@opentelemetry/exporter-trace-otlp-http",
  "http/protobuf": "@opentelemetry/exporter-trace-otlp-proto",
};

const T0_S = 1_700_000_000; // a fixed instant, so that the run's figures are exact

function at(ms) {
  // OpenTelemetry JS's HrTime: [seconds, nanoseconds].
  return [T0_S + Math.floor(ms / 1000), (ms % 1000) * 1_000_000];
}

const chatMs = Number(process.argv[2]);
if (process.argv.length !== 3 || !Number.isInteger(chatMs) || chatMs < 0 || chatMs > 10_000) {
  console.error(`usage: node app.mjs CHAT_MS (whole milliseconds), got ${process.argv.slice(2)}`);
  process.exit(2);
}
const protocol = (
  process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ||
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL ||
  "http/protobuf"
).trim().toLowerCase();
if (!(protocol in EXPORTERS)) {
  console.error(`app.mjs: OTLP protocol ${protocol} not supported (http/json, http/protobuf)`);
  process.exit(2);
}
const { OTLPTraceExporter } = await import(EXPORTERS[protocol]);

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "support-agent-node" }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
const tracer = provider.getTracer("support-agent");

const workflow = tracer.startSpan("invoke_workflow support", {
  startTime: at(0),
  attributes: {
    "gen_ai.operation.name": "invoke_workflow",
    "gen_ai.workflow.name": "support",
  },
});
const chat = tracer.startSpan(
  "chat gpt-4o-mini",
  {
    kind: SpanKind.CLIENT,
    startTime: at(1),
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.request.stream": false, // not streamed: its end is the output
      "gen_ai.response.model": "gpt-4o-mini",
      "gen_ai.usage.input_tokens": 1000,
      "gen_ai.usage.output_tokens": 200,
    },
  },
  trace.setSpan(context.active(), workflow),
);
chat.end(at(1 + chatMs));
workflow.end(at(2 + chatMs));

// Shutdown flushes the batch. The exporters report a failed export to OpenTelemetry's
// diagnostic logger only, so a flush that failed is not an error here: chainlat run says
// when it received no span.
await provider.shutdown();
