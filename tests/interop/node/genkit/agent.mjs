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

import { appendFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";

import { SpanStatusCode, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { Resource } from "@opentelemetry/resources";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { genkit } from "genkit";
import { disableOTelRootSpanDetection, enableTelemetry } from "genkit/tracing";

const { values: args } = parseArgs({
  options: {
    traces: { type: "string" },
    "base-url": { type: "string" },
    wrapped: { type: "boolean", default: false },
    httpx: { type: "boolean", default: false },
    paced: { type: "boolean", default: false },
  },
});
if (!args.traces || !args["base-url"]) {
  console.error("usage: node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]");
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

const exporter = new JsonLinesSpanExporter(args.traces);
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
  // Genkit's retrievers stand for vector stores and embedders; the keyword search is the
  // span a Node user writes, of the GenAI convention, as in ../agent.mjs.
  const attributes = { "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "faq-index" };
  return withSpan("retrieval faq-index", attributes, () => searchIndex(QUESTION));
}

function pythonJson(object) {
  // The reference's text of the result (Python's json.dumps: ", " and ": "), so that the
  // sim counts the same input tokens for the call that reads it (compat-oai sends a
  // string result as it is).
  return `{${Object.entries(object).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(", ")}}`;
}

const lookupOrder = ai.defineTool(
  // The reference's JSON schema as it is (a zod schema would add `additionalProperties`
  // and `$schema`). compat-oai sends the name and the parameters, not the description.
  { name: TOOL_NAME, description: TOOL_DESCRIPTION, inputJsonSchema: TOOL_PARAMETERS },
  async ({ order_id }) =>
    ownInterval("tool", async () => {
      await sleep(TOOL_MS);
      return pythonJson({ order_id: order_id ?? "A-1042", status: "shipped", delivered_days_ago: 3 });
    }),
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

async function runOnce() {
  if (!args.wrapped) return agentFlow();
  const workflow = { "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent" };
  return withSpan("invoke_workflow agent", workflow, () => agentFlow());
}

// --- the protocol with run.py (../../_agent.py, `_orders`) ------------------------------
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

await runOnce(); // the warm-up: connections, Genkit's first use; its spans dropped
exporter.open = true;
INTERVALS.length = 0;
for await (const _ of orders()) {
  anchorClock();
  await runOnce();
}
await processor.forceFlush();
writeFileSync(
  args.traces + ".intervals.json",
  // BigInts written as JSON integers, exact.
  JSON.stringify(INTERVALS, (_key, value) => (typeof value === "bigint" ? `#${value}#` : value)).replace(
    /"#(\d+)#"/g,
    "$1",
  ),
);
process.exit(0);
