// The interop agent in Node.js: the Vercel AI SDK, traced by OpenTelemetry JS.
//
// The same five steps as the Python agents (../_agent.py), as a Node user writes them:
// the retrieval as a span of the OpenTelemetry API (the AI SDK has no retriever), the
// plan as `generateText` offered the AI SDK's own `tool({ execute })`, the fan-out as two
// `generateText` calls in `Promise.all`, the answer as `streamText`. Model calls go to the
// sim's /v1/chat/completions through `openai.chat(model)` (the provider's default model
// speaks the Responses API, which the sim does not serve).
//
//   node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//                  [--format legacy|genai]
//
// --format (or AI_SDK_TELEMETRY): which @ai-sdk/otel integration is registered with
// `registerTelemetry`: `LegacyOpenTelemetry` (the `ai.*` spans) or `OpenTelemetry` (the
// GenAI-convention spans). --httpx: OpenTelemetry JS's undici instrumentation (HTTP CLIENT
// spans around each request to the sim), the Node counterpart of instrument_httpx().
// --wrapped: there is no chainlat in Node; the application's root span `agent` is wrapped
// in a workflow span of the GenAI convention (`invoke_workflow agent`,
// `gen_ai.operation.name = "invoke_workflow"`, `gen_ai.workflow.name = "agent"`), written
// with the OpenTelemetry API as a Node user would. Unwrapped, the root is `agent` alone.
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
  TOOL_PARAMETERS,
  agentArgs,
  applicationSpans,
  lookupOrder as ownLookupOrder,
  record,
} from "./harness.mjs"; // beside this file, in the repository and in the npm folder

const args = agentArgs(
  { format: { type: "string", default: process.env.AI_SDK_TELEMETRY ?? "legacy" } },
  " [--format legacy|genai]",
);
if (!["legacy", "genai"].includes(args.format)) {
  console.error(`--format: legacy or genai, not ${args.format}`);
  process.exit(2);
}

const stack = `ai-sdk-${args.format}`;
const exporter = new JsonLinesSpanExporter(args.traces, JsonTraceSerializer, ExportResultCode);
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": `interop-${stack}` }),
  // Each span written when it ends, so the warm-up's are dropped and the recorded runs'
  // are all in the file when the script exits.
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
provider.register();
if (args.httpx) {
  // Before the first request: the instrumentation subscribes to undici's diagnostics
  // channels, which Node's global fetch (the AI SDK's) publishes to.
  registerInstrumentations({ tracerProvider: provider, instrumentations: [new UndiciInstrumentation()] });
}

// The AI SDK is imported after the provider is global, as an application does at start-up.
const { generateText, jsonSchema, registerTelemetry, stepCountIs, streamText, tool } = await import("ai");
const { createOpenAI } = await import("@ai-sdk/openai");
const { LegacyOpenTelemetry, OpenTelemetry } = await import("@ai-sdk/otel");

registerTelemetry(args.format === "legacy" ? new LegacyOpenTelemetry() : new OpenTelemetry());

const openai = createOpenAI({ baseURL: args["base-url"], apiKey: "sk-interop" });
const { withSpan, retrieve, wrappedIf } = applicationSpans(trace.getTracer("interop-app"), SpanStatusCode);

// --- the steps --------------------------------------------------------------------------
const lookupOrder = tool({
  description: TOOL_DESCRIPTION,
  // The reference's JSON schema as it is: a zod schema would add `additionalProperties`
  // and `$schema`, 20 more input tokens per planning call (the sim counts what is sent).
  inputSchema: jsonSchema(TOOL_PARAMETERS),
  execute: async ({ order_id }) => ownLookupOrder(order_id),
});

async function agent() {
  const docs = await retrieve();
  const plan = await generateText({
    model: openai.chat(PLAN_MODEL),
    system: SYSTEM,
    prompt: QUESTION + "\n\nDocuments:\n" + docs.join("\n"),
    tools: { [TOOL_NAME]: lookupOrder },
    stopWhen: stepCountIs(MAX_TOOL_ROUNDS),
    maxRetries: 0,
  });
  const notes = plan.text;
  const ask = (prompt) =>
    generateText({ model: openai.chat(FAST_MODEL), prompt: prompt + notes, maxRetries: 0 }).then((r) => r.text);
  const [summary, policy] = await Promise.all([ask(SUMMARY_PROMPT), ask(POLICY_PROMPT)]);
  const answer = streamText({
    model: openai.chat(ANSWER_MODEL),
    prompt: ANSWER_PROMPT + summary + policy,
    maxRetries: 0,
  });
  for await (const _chunk of answer.textStream) {
    // read to its end, as a client streaming the answer on
  }
  await answer.usage;
}

await record({
  paced: args.paced,
  traces: args.traces,
  exporter,
  runOnce: () => wrappedIf(args.wrapped, () => withSpan("agent", {}, agent)),
  finish: async () => {
    await provider.forceFlush();
    await provider.shutdown();
  },
});
