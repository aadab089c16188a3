// The interop agent on the plain openai SDK (Node.js), traced by OpenTelemetry JS contrib's
// OpenAI instrumentation (@opentelemetry/instrumentation-openai, the GenAI semantic
// conventions).
//
// The same five steps as the Python agents (../../_agent.py), the reference's loop
// (`_agent.plain_openai_agent`, harness.mjs's `openaiAgent`), as ../openai-openllmetry/
// runs it: the retrieval and the tool as spans of the GenAI convention written with the
// OpenTelemetry API (harness.mjs's `applicationSpans`; the instrumentation has neither),
// the model calls through
// `client.chat.completions.create`, each a `chat {model}` CLIENT span of the
// instrumentation.
//
//   node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// The instrumentation patches openai (">=4.19.0 <7") when it is loaded, through
// require-in-the-middle, or through import-in-the-middle when Node runs with
// @opentelemetry/instrumentation's loader hook; it has no manual way. This script is ESM
// and run by `node agent.mjs`, with no loader hook, so it loads openai's CommonJS build
// with `createRequire`, after the instrumentation is enabled: the require hook patches
// it. Message content is not captured (the instrumentation's default). OpenTelemetry JS
// 3.x (@opentelemetry/sdk-trace's `TracerProvider`, the AsyncLocalStorage context
// manager, @opentelemetry/api 1.10): the instrumentation wants @opentelemetry/api ^1.10,
// which the 2.x SDK of the other Node folders does not accept. --wrapped: a workflow span
// of the GenAI convention (`invoke_workflow agent`) around the application's root span
// `agent`; unwrapped, `agent` alone. --httpx: OpenTelemetry JS's undici instrumentation
// (HTTP CLIENT spans around each request of Node's fetch, the openai SDK's), the Node
// counterpart of instrument_httpx().
//
// Spans are written as OTLP JSON lines (one `{"resourceSpans": [...]}` per export, as
// chainlat's JsonLinesSpanExporter writes), each span when it ends; the warm-up's are
// dropped. The intervals of the retrieval's and the tool's own functions go to
// FILE.intervals.json, on the spans' clock (the wall clock, in ns).

import { createRequire } from "node:module";

import { SpanStatusCode, context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ExportResultCode } from "@opentelemetry/core";
import { isWrapped, registerInstrumentations } from "@opentelemetry/instrumentation";
import { OpenAIInstrumentation } from "@opentelemetry/instrumentation-openai";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

import {
  JsonLinesSpanExporter,
  agentArgs,
  recordOpenaiAgent,
} from "./harness.mjs"; // ../harness.mjs, copied beside this file by node_stack.py

const args = agentArgs();

const exporter = new JsonLinesSpanExporter(args.traces, JsonTraceSerializer, ExportResultCode);
const provider = new TracerProvider({
  resource: resourceFromAttributes({ "service.name": "interop-otel-openai-js" }),
  spanProcessors: [new SimpleSpanProcessor({ exporter })], // 3.x: its options, not the exporter
});
// The 3.x SDK's provider has no register(): the context manager and the provider are made
// global with the API, as the SDK's README shows for Node.
context.setGlobalContextManager(new AsyncLocalStorageContextManager());
trace.setGlobalTracerProvider(provider);

// Before openai is loaded, so that its require hook sees it; before the first request,
// so that the undici instrumentation has subscribed to undici's diagnostics channels,
// which Node's global fetch (the openai SDK's) publishes to.
const openaiInstrumentation = new OpenAIInstrumentation();
const instrumentations = args.httpx ? [openaiInstrumentation, new UndiciInstrumentation()] : [openaiInstrumentation];
registerInstrumentations({ tracerProvider: provider, instrumentations });

const { OpenAI } = createRequire(import.meta.url)("openai");
if (!isWrapped(OpenAI.Chat.Completions.prototype.create)) {
  console.error("@opentelemetry/instrumentation-openai did not patch openai's chat completions");
  process.exit(2);
}

await recordOpenaiAgent({
  OpenAI,
  args,
  exporter,
  provider,
  tracer: trace.getTracer("interop-app"),
  spanStatusCode: SpanStatusCode,
});
