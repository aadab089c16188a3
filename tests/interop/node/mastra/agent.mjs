// The interop agent on Mastra (Node.js), its traces exported by @mastra/otel-exporter.
//
// The same five steps as the Python agents (../../_agent.py) and the AI SDK's agent
// (../agent.mjs), as a Mastra user writes them: three Mastra `Agent`s registered in a
// `Mastra` instance (the planner with a `createTool` tool and `maxSteps`, the fan-out agent
// called twice in `Promise.all`, the answerer's `stream` read to its end), the retrieval a
// span of the OpenTelemetry API as in ../agent.mjs. The model is the sim as Mastra's model
// router takes an OpenAI-compatible server: `{ id: "sim/<model>", url, apiKey }`
// (/v1/chat/completions through Node's fetch).
//
//   node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// Mastra traces every agent run itself (its own spans, not OpenTelemetry's) and sends them
// to its exporters; `OtelExporter` converts them to OpenTelemetry spans of the GenAI
// convention and hands them to a span exporter (its `exporter` option: the JSON lines
// exporter below) through a BatchSpanProcessor of its own. The run's root is the
// application's span, `agent` (an OpenTelemetry span, as in ../agent.mjs); each Mastra call
// joins its trace through `tracingOptions: { traceId, parentSpanId }`, Mastra's way to make
// a run's root span the child of a span of another tracer. --wrapped: a workflow span of
// the GenAI convention (`invoke_workflow agent`) around it. --httpx: OpenTelemetry JS's
// undici instrumentation (HTTP CLIENT spans around each request of Node's fetch, which the
// model router uses), the Node counterpart of instrument_httpx().
//
// Spans are written as OTLP JSON lines (one `{"resourceSpans": [...]}` per export, as
// chainlat's JsonLinesSpanExporter writes); the warm-up's are dropped. The intervals of the
// retrieval's and the tool's own functions go to FILE.intervals.json, on the spans' clock
// (the wall clock, in ns).

import { SpanStatusCode, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { registerInstrumentations } from "@opentelemetry/instrumentation";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

import {
  ANSWER_MODEL,
  ANSWER_PROMPT,
  FAST_MODEL,
  JsonLinesSpanExporter,
  MAX_TOOL_ROUNDS,
  PLAN_MODEL,
  POLICY_PROMPT,
  QUESTION,
  SUMMARY_PROMPT,
  SYSTEM,
  TOOL_DESCRIPTION,
  TOOL_NAME,
  agentArgs,
  applicationSpans,
  lookupOrder as ownLookupOrder,
  record,
} from "./harness.mjs"; // ../harness.mjs, copied beside this file by node_stack.py

const args = agentArgs();

const exporter = new JsonLinesSpanExporter(args.traces, JsonTraceSerializer, ExportResultCode);
// The application's own spans (its root, the retrieval, undici's): the OpenTelemetry SDK,
// each span written when it ends.
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "interop-mastra" }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
provider.register();
if (args.httpx) {
  // Before the first request: the instrumentation subscribes to undici's diagnostics
  // channels, which Node's global fetch (the model router's) publishes to.
  registerInstrumentations({ tracerProvider: provider, instrumentations: [new UndiciInstrumentation()] });
}

// Mastra is imported after the provider is global, as an application does at start-up.
const { Mastra } = await import("@mastra/core/mastra");
const { Agent } = await import("@mastra/core/agent");
const { createTool } = await import("@mastra/core/tools");
const { Observability } = await import("@mastra/observability");
const { OtelExporter } = await import("@mastra/otel-exporter");
const { z } = await import("zod");

// Mastra's spans, as its docs tell a user to send them to an OpenTelemetry backend: an
// `OtelExporter` in the `Observability` of the Mastra instance. The `custom` provider's
// endpoint is required but unused once `exporter` is given (no request is sent to it);
// logs off (their exporter would send to that endpoint).
const otelExporter = new OtelExporter({
  provider: { custom: { endpoint: "http://127.0.0.1:9/v1/traces", protocol: "http/json" } },
  exporter,
  signals: { logs: false },
});
const observability = new Observability({
  configs: { otel: { serviceName: "interop-mastra", exporters: [otelExporter] } },
});
const { withSpan, retrieve, wrappedIf } = applicationSpans(trace.getTracer("interop-app"), SpanStatusCode);

// --- the steps --------------------------------------------------------------------------
const lookupOrder = createTool({
  id: TOOL_NAME,
  description: TOOL_DESCRIPTION,
  inputSchema: z.object({ order_id: z.string().describe("The order id.") }),
  execute: async ({ order_id }) => ownLookupOrder(order_id),
});

const sim = (model) => ({ id: `sim/${model}`, url: args["base-url"], apiKey: "sk-interop" });
const mastra = new Mastra({
  agents: {
    planner: new Agent({
      id: "planner",
      name: "planner",
      instructions: SYSTEM,
      model: sim(PLAN_MODEL),
      tools: { [TOOL_NAME]: lookupOrder },
    }),
    // The reference's fan-out and answer calls carry no system message.
    fast: new Agent({ id: "fast", name: "fast", instructions: "", model: sim(FAST_MODEL) }),
    answerer: new Agent({ id: "answerer", name: "answerer", instructions: "", model: sim(ANSWER_MODEL) }),
  },
  observability,
});

function joined() {
  // The application's active span as the parent of Mastra's run (its root span).
  const { traceId, spanId } = trace.getActiveSpan().spanContext();
  return { tracingOptions: { traceId, parentSpanId: spanId }, modelSettings: { maxRetries: 0 } };
}

async function agent() {
  const docs = await retrieve();
  const plan = await mastra
    .getAgent("planner")
    .generate(QUESTION + "\n\nDocuments:\n" + docs.join("\n"), { ...joined(), maxSteps: MAX_TOOL_ROUNDS });
  const notes = plan.text;
  const ask = (prompt) =>
    mastra
      .getAgent("fast")
      .generate(prompt + notes, joined())
      .then((r) => r.text);
  const [summary, policy] = await Promise.all([ask(SUMMARY_PROMPT), ask(POLICY_PROMPT)]);
  const answer = await mastra.getAgent("answerer").stream(ANSWER_PROMPT + summary + policy, joined());
  for await (const _chunk of answer.textStream) {
    // read to its end, as a client streaming the answer on
  }
  await answer.text;
}

await record({
  paced: args.paced,
  traces: args.traces,
  exporter,
  // Mastra hands its spans to the exporter after their run (its event bus, then the
  // OtelExporter's BatchSpanProcessor: 5 s or 512 spans), long after the application's
  // root was written. Flushed after each run, as Mastra's docs tell an application whose
  // process may stop once a request is done: each run's spans follow its root in the file.
  runOnce: async () => {
    await wrappedIf(args.wrapped, () => withSpan("agent", {}, agent));
    await observability.flush();
  },
  finish: () => provider.forceFlush(),
});
