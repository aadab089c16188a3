// The interop agent on Genkit (Node.js), traced by Genkit's own OpenTelemetry spans.
//
// The same five steps as the Python agents (../../_agent.py) and the AI SDK's agent
// (../agent.mjs), as a Genkit user writes them: the agent a Genkit flow (`ai.defineFlow`,
// Genkit's root of a trace), the retrieval a span of the OpenTelemetry API as in
// ../agent.mjs, the plan `ai.generate` offered a Genkit tool (`ai.defineTool`) with
// `maxTurns`, the fan-out two `ai.generate` in `Promise.all`, the answer
// `ai.generateStream`, its stream read to the end. The model is the sim, through
// @genkit-ai/compat-oai's `openAICompatible` plugin (the openai SDK, /v1/chat/completions).
//
//   node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// Genkit traces every action itself (its `genkit:*` attributes) and sends its spans where
// a user tells it to: `enableTelemetry` of `genkit/tracing`, given the span processors
// (and instrumentations) of the OpenTelemetry Node SDK it starts. --httpx: OpenTelemetry
// JS's http instrumentation in that SDK (HTTP CLIENT spans around each request of the
// openai SDK, which sends through node-fetch and `http`), the Node counterpart of
// instrument_httpx(). --wrapped: the flow is called inside a workflow span of the GenAI
// convention (`invoke_workflow agent`), written with the OpenTelemetry API; Genkit starts
// a flow called outside any Genkit action as a new trace, whatever the span around it,
// unless `disableOTelRootSpanDetection()` (genkit/tracing) says otherwise: called here, as
// a user whose application has spans of its own around Genkit's must.
//
// Spans are written as OTLP JSON lines (one `{"resourceSpans": [...]}` per export, as
// chainlat's JsonLinesSpanExporter writes), each span when it ends; the warm-up's are
// dropped. The intervals of the retrieval's and the tool's own functions go to
// FILE.intervals.json, on the spans' clock (the wall clock, in ns).

import { SpanStatusCode, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { Resource } from "@opentelemetry/resources";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { genkit } from "genkit";
import { disableOTelRootSpanDetection, enableTelemetry } from "genkit/tracing";

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
} from "./harness.mjs"; // ../harness.mjs, copied beside this file by node_stack.py

const args = agentArgs();

const exporter = new JsonLinesSpanExporter(args.traces, JsonTraceSerializer, ExportResultCode);
const processor = new SimpleSpanProcessor(exporter);
// Genkit's OpenTelemetry Node SDK (sdk-node 0.52, SDK 1.25; importing genkit sets it up),
// started with this exporter
// beside Genkit's own (its Developer UI's, which sends nothing without GENKIT_ENV=dev or
// GENKIT_TELEMETRY_SERVER). Each span written when it ends, so the warm-up's are dropped
// and the recorded runs' are all in the file when the script exits.
await enableTelemetry({
  resource: new Resource({ "service.name": "interop-genkit" }),
  spanProcessors: [processor],
  instrumentations: args.httpx ? [new HttpInstrumentation()] : [],
});
disableOTelRootSpanDetection();

// The model's plugin (the openai SDK, node-fetch, `http`) is imported once the http module
// is patched, as an application that instruments it does at start-up.
const { openAICompatible } = await import("@genkit-ai/compat-oai");

const ai = genkit({
  plugins: [
    openAICompatible({ name: "sim", baseURL: args["base-url"], apiKey: "sk-interop", maxRetries: 0 }),
  ],
});
const { retrieve, wrappedIf } = applicationSpans(trace.getTracer("interop-app"), SpanStatusCode);

// --- the steps --------------------------------------------------------------------------
const lookupOrder = ai.defineTool(
  // The reference's JSON schema as it is (a zod schema would add `additionalProperties`
  // and `$schema`). compat-oai sends the name and the parameters, not the description.
  { name: TOOL_NAME, description: TOOL_DESCRIPTION, inputJsonSchema: TOOL_PARAMETERS },
  async ({ order_id }) => ownLookupOrder(order_id),
);

const agentFlow = ai.defineFlow("agent", async () => {
  const docs = await retrieve();
  const plan = await ai.generate({
    model: `sim/${PLAN_MODEL}`,
    system: SYSTEM,
    prompt: QUESTION + "\n\nDocuments:\n" + docs.join("\n"),
    tools: [lookupOrder],
    maxTurns: MAX_TOOL_ROUNDS,
  });
  const notes = plan.text;
  const ask = (prompt) => ai.generate({ model: `sim/${FAST_MODEL}`, prompt: prompt + notes }).then((r) => r.text);
  const [summary, policy] = await Promise.all([ask(SUMMARY_PROMPT), ask(POLICY_PROMPT)]);
  const { stream, response } = ai.generateStream({
    model: `sim/${ANSWER_MODEL}`,
    prompt: ANSWER_PROMPT + summary + policy,
  });
  for await (const _chunk of stream) {
    // read to its end, as a client streaming the answer on
  }
  return (await response).text;
});

await record({
  paced: args.paced,
  traces: args.traces,
  exporter,
  // Unwrapped, the flow is the run's root.
  runOnce: () => wrappedIf(args.wrapped, () => agentFlow()),
  finish: () => processor.forceFlush(),
});
