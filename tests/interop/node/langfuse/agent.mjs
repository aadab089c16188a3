// The interop agent traced by Langfuse's JavaScript SDK (Node.js), which writes
// OpenTelemetry spans.
//
// The same five steps as the Python agents (../../_agent.py), as the Python Langfuse agent
// (../../agents/langfuse.py) writes them: the reference's loop against the openai SDK,
// the request an `observe()`d function, the retrieval and the tool `observe()`d with
// `asType: "retriever"` and `asType: "tool"`, and the model calls through Langfuse's
// `observeOpenAI` client, each a `generation` with its model, usage and first chunk's time.
//
//   node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// Langfuse's tracing writes through the global tracer provider (@langfuse/tracing asks
// `trace.getTracerProvider()`), so its spans go wherever the application's go. Its
// `LangfuseSpanProcessor` (@langfuse/otel), which would send them to a Langfuse server,
// is not added: no Langfuse server runs here. --wrapped: a workflow span of the GenAI
// convention (`invoke_workflow agent`) around the request. --httpx: OpenTelemetry JS's
// undici instrumentation (HTTP CLIENT spans around each request of Node's fetch), the Node
// counterpart of instrument_httpx().
//
// Spans are written as OTLP JSON lines (one `{"resourceSpans": [...]}` per export, as
// chainlat's JsonLinesSpanExporter writes), each span when it ends; the warm-up's are
// dropped. The intervals of the retrieval's and the tool's own functions go to
// FILE.intervals.json, on the spans' clock (the wall clock, in ns).

import { SpanStatusCode, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { registerInstrumentations } from "@opentelemetry/instrumentation";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

import {
  JsonLinesSpanExporter,
  QUESTION,
  TOOL_NAME,
  agentArgs,
  applicationSpans,
  lookupOrder as ownLookupOrder,
  openaiAgent,
  record,
  searchIndex,
} from "./harness.mjs"; // ../harness.mjs, copied beside this file by node_stack.py

const args = agentArgs();

const exporter = new JsonLinesSpanExporter(args.traces, JsonTraceSerializer, ExportResultCode);
const processor = new SimpleSpanProcessor(exporter);
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "interop-langfuse-js" }),
  spanProcessors: [processor],
});
provider.register();
if (args.httpx) {
  // Before the first request: the instrumentation subscribes to undici's diagnostics
  // channels, which Node's global fetch (the openai SDK's) publishes to.
  registerInstrumentations({ tracerProvider: provider, instrumentations: [new UndiciInstrumentation()] });
}

// Langfuse and the openai SDK are imported after the provider is global, as an
// application does at start-up.
const { observe } = await import("@langfuse/tracing");
const { observeOpenAI } = await import("@langfuse/openai");
const { default: OpenAI } = await import("openai");

const { wrappedIf } = applicationSpans(trace.getTracer("interop-app"), SpanStatusCode);

const client = observeOpenAI(new OpenAI({ baseURL: args["base-url"], apiKey: "sk-interop", maxRetries: 0 }));

const retrieve = observe(() => searchIndex(QUESTION), { name: "retrieve", asType: "retriever" });
const runTool = observe((orderId) => ownLookupOrder(orderId), { name: TOOL_NAME, asType: "tool" });

const agent = openaiAgent({ client, retrieve, runTool });

const request = observe(agent, { name: "agent" });

await record({
  paced: args.paced,
  traces: args.traces,
  exporter,
  runOnce: () => wrappedIf(args.wrapped, request),
  finish: () => processor.forceFlush(),
});
