// The interop agent on the plain openai SDK (Node.js), traced by OpenLLMetry JS's OpenAI
// instrumentation (@traceloop/instrumentation-openai).
//
// The same five steps as the Python agents (../../_agent.py), the reference's loop
// (`_agent.plain_openai_agent`, harness.mjs's `openaiAgent`, which ../langfuse/ runs too):
// the retrieval and the tool as spans of the GenAI convention written with the
// OpenTelemetry API (harness.mjs's `applicationSpans`; OpenLLMetry's instrumentation has
// neither), the model calls through `client.chat.completions.create`,
// each a `chat {model}` CLIENT span of the instrumentation. ../openai-otel/agent.mjs is the
// same agent traced by OpenTelemetry JS contrib's instrumentation.
//
//   node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// The instrumentation declares openai ">=4 <7" for its require hook; this script is ESM
// and imports openai's ESM build, which no require hook sees, so the class is patched by
// the instrumentation's own `manuallyInstrument(OpenAI)`, as OpenLLMetry's SDK does for
// ESM (`instrumentModules`). `traceContent: false`: no prompts or completions in the
// spans. --wrapped: a workflow span of the GenAI convention (`invoke_workflow agent`)
// around the application's root span `agent`; unwrapped, `agent` alone. --httpx:
// OpenTelemetry JS's undici instrumentation (HTTP CLIENT spans around each request of
// Node's fetch, the openai SDK's), the Node counterpart of instrument_httpx().
//
// Spans are written as OTLP JSON lines (one `{"resourceSpans": [...]}` per export, as
// chainlat's JsonLinesSpanExporter writes), each span when it ends; the warm-up's are
// dropped. The intervals of the retrieval's and the tool's own functions go to
// FILE.intervals.json, on the spans' clock (the wall clock, in ns).

import { SpanStatusCode, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { isWrapped, registerInstrumentations } from "@opentelemetry/instrumentation";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { OpenAIInstrumentation } from "@traceloop/instrumentation-openai";

import {
  JsonLinesSpanExporter,
  agentArgs,
  recordOpenaiAgent,
} from "./harness.mjs"; // ../harness.mjs, copied beside this file by node_stack.py

const args = agentArgs();

const exporter = new JsonLinesSpanExporter(args.traces, JsonTraceSerializer, ExportResultCode);
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "interop-openllmetry-js" }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
provider.register();

const openaiInstrumentation = new OpenAIInstrumentation({ traceContent: false });
// Before the first request: the undici instrumentation subscribes to undici's diagnostics
// channels, which Node's global fetch (the openai SDK's) publishes to.
const instrumentations = args.httpx ? [openaiInstrumentation, new UndiciInstrumentation()] : [openaiInstrumentation];
registerInstrumentations({ tracerProvider: provider, instrumentations });

// The openai SDK is imported after the provider is global, as an application does at
// start-up, and patched in place.
const { default: OpenAI } = await import("openai");
openaiInstrumentation.manuallyInstrument(OpenAI);
if (!isWrapped(OpenAI.Chat.Completions.prototype.create)) {
  console.error("@traceloop/instrumentation-openai did not patch openai's chat completions");
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
