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

import { appendFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";

import { SpanStatusCode, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { registerInstrumentations } from "@opentelemetry/instrumentation";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

const { values: args } = parseArgs({
  options: {
    traces: { type: "string" },
    "base-url": { type: "string" },
    wrapped: { type: "boolean", default: false },
    httpx: { type: "boolean", default: false },
    paced: { type: "boolean", default: false },
    format: { type: "string", default: process.env.AI_SDK_TELEMETRY ?? "legacy" },
  },
});
if (!args.traces || !args["base-url"]) {
  console.error("usage: node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced] [--format legacy|genai]");
  process.exit(2);
}
if (!["legacy", "genai"].includes(args.format)) {
  console.error(`--format: legacy or genai, not ${args.format}`);
  process.exit(2);
}

// The steps, their latencies and prompts: as ../_agent.py.
const PLAN_MODEL = "sim-plan";
const FAST_MODEL = "sim-fast";
const ANSWER_MODEL = "sim-answer";
const MAX_TOOL_ROUNDS = 3;
const RETRIEVE_MS = 30;
const TOOL_MS = 25;
const QUESTION = "Where is my order A-1042, and can I still return it?";
const SYSTEM = "You are a support agent. Use the tools when an order number is mentioned.";
const TOOL_NAME = "lookup_order";
const TOOL_DESCRIPTION = "Look up an order's status by its id.";
const TOOL_PARAMETERS = {
  type: "object",
  properties: { order_id: { type: "string", description: "The order id." } },
  required: ["order_id"],
};
const SUMMARY_PROMPT = "Summarise the order status in one sentence: ";
const POLICY_PROMPT = "Say whether the return policy allows a return now: ";
const ANSWER_PROMPT = "Write the answer to the customer from these notes: ";
const DOCS = [
  ["returns", "Orders can be returned within 30 days of delivery for a full refund."],
  ["shipping", "Orders ship within two days; tracking is sent by email."],
  ["order status", "The order status page shows where an order is and when it arrives."],
  ["warranty", "Devices carry a two year warranty against defects."],
];
const RECORDED_RUNS = 5;
const READY = "@@chainlat-interop ready";
const DONE = "@@chainlat-interop done";

// --- the spans' clock -------------------------------------------------------------------
// OpenTelemetry JS starts a span at Date.now() (whole milliseconds) and ends it at that
// start plus performance.now()'s elapsed time. The own intervals are read on the wall
// clock to the microsecond: performance.now() anchored at the instant Date.now() ticks.
let anchorMs = 0;
let anchorPerf = 0;
function anchorClock() {
  const before = Date.now();
  let now = before;
  while (now === before) now = Date.now();
  anchorPerf = performance.now();
  anchorMs = now;
}
function wallNs() {
  // A BigInt: nanoseconds since 1970 are beyond a double's exact integers.
  return BigInt(anchorMs) * 1_000_000n + BigInt(Math.round((performance.now() - anchorPerf) * 1e6));
}
anchorClock();

const INTERVALS = [];
async function ownInterval(kind, fn) {
  const start = wallNs();
  try {
    return await fn();
  } finally {
    INTERVALS.push({ kind, start_ns: start, end_ns: wallNs() });
  }
}

// --- tracing ----------------------------------------------------------------------------
class JsonLinesSpanExporter {
  // One OTLP JSON request ({"resourceSpans": [...]}) per line; nothing before `open`.
  constructor(path) {
    this.path = path;
    this.open = false;
    writeFileSync(path, "");
  }
  export(spans, done) {
    if (this.open && spans.length > 0) {
      try {
        const body = Buffer.from(JsonTraceSerializer.serializeRequest(spans)).toString("utf8");
        appendFileSync(this.path, body + "\n");
      } catch (error) {
        done({ code: ExportResultCode.FAILED, error });
        return;
      }
    }
    done({ code: ExportResultCode.SUCCESS });
  }
  shutdown() {
    return Promise.resolve();
  }
  forceFlush() {
    return Promise.resolve();
  }
}

const stack = `ai-sdk-${args.format}`;
const exporter = new JsonLinesSpanExporter(args.traces);
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
const appTracer = trace.getTracer("interop-app");

// --- the steps --------------------------------------------------------------------------
const db = new DatabaseSync(":memory:");
db.exec("CREATE VIRTUAL TABLE docs USING fts5(title, body)");
const insert = db.prepare("INSERT INTO docs VALUES (?, ?)");
for (const [title, body] of DOCS) insert.run(title, body);
const search = db.prepare("SELECT body FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?");

function words(text) {
  return text.toLowerCase().split(/\s+/).map((w) => [...w].filter((c) => /[\p{L}\p{N}]/u.test(c)).join(""));
}

async function searchIndex(query, k = 2) {
  // The keyword search, after RETRIEVE_MS standing in for a remote index.
  return ownInterval("data", async () => {
    await sleep(RETRIEVE_MS);
    const match = words(query).filter((w) => w.length > 3).join(" OR ");
    return search.all(match, k).map((row) => String(row.body));
  });
}

async function withSpan(name, attributes, fn) {
  return appTracer.startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error?.message ?? error) });
      span.setAttribute("error.type", error?.name ?? "Error");
      throw error;
    } finally {
      span.end();
    }
  });
}

function retrieve() {
  // The AI SDK has no retriever: the span a Node user writes, of the GenAI convention.
  const attributes = { "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "faq-index" };
  return withSpan("retrieval faq-index", attributes, () => searchIndex(QUESTION));
}

function pythonJson(object) {
  // The reference's text of the result (Python's json.dumps: ", " and ": "), so that the
  // sim counts the same input tokens for the call that reads it.
  return `{${Object.entries(object).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(", ")}}`;
}

const lookupOrder = tool({
  description: TOOL_DESCRIPTION,
  // The reference's JSON schema as it is: a zod schema would add `additionalProperties`
  // and `$schema`, 20 more input tokens per planning call (the sim counts what is sent).
  inputSchema: jsonSchema(TOOL_PARAMETERS),
  execute: async ({ order_id }) =>
    ownInterval("tool", async () => {
      await sleep(TOOL_MS);
      return pythonJson({ order_id: order_id ?? "A-1042", status: "shipped", delivered_days_ago: 3 });
    }),
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

async function runOnce() {
  const root = () => withSpan("agent", {}, agent);
  if (!args.wrapped) return root();
  const workflow = { "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent" };
  return withSpan("invoke_workflow agent", workflow, root);
}

// --- the protocol with run.py (../_agent.py, `_orders`) ---------------------------------
async function* orders() {
  if (!args.paced) {
    for (let i = 0; i < RECORDED_RUNS; i++) yield;
    return;
  }
  console.log(READY);
  const lines = createInterface({ input: process.stdin, terminal: false });
  for await (const line of lines) {
    if (line.trim() !== "run") break;
    yield;
    console.log(DONE);
  }
  lines.close();
}

await runOnce(); // the warm-up: connections, the SDK's first use; its spans dropped
exporter.open = true;
INTERVALS.length = 0;
for await (const _ of orders()) {
  anchorClock();
  await runOnce();
}
await provider.forceFlush();
await provider.shutdown();
writeFileSync(
  args.traces + ".intervals.json",
  // BigInts written as JSON integers, exact.
  JSON.stringify(INTERVALS, (_key, value) => (typeof value === "bigint" ? `#${value}#` : value)).replace(
    /"#(\d+)#"/g,
    "$1",
  ),
);
process.exit(0);
