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
// start plus performance.now()'s elapsed time; Mastra times its spans with Date (whole
// milliseconds, both ends). The own intervals are read on the wall clock to the
// microsecond: performance.now() anchored at the instant Date.now() ticks.
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
  // Mastra's retrieval (@mastra/rag) stands for vector stores and embedders; the keyword
  // search is the span a Node user writes, of the GenAI convention, as in ../agent.mjs.
  const attributes = { "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "faq-index" };
  return withSpan("retrieval faq-index", attributes, () => searchIndex(QUESTION));
}

function pythonJson(object) {
  // The reference's text of the result (Python's json.dumps: ", " and ": ").
  return `{${Object.entries(object).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(", ")}}`;
}

const lookupOrder = createTool({
  id: TOOL_NAME,
  description: TOOL_DESCRIPTION,
  inputSchema: z.object({ order_id: z.string().describe("The order id.") }),
  execute: async ({ order_id }) =>
    ownInterval("tool", async () => {
      await sleep(TOOL_MS);
      return pythonJson({ order_id: order_id ?? "A-1042", status: "shipped", delivered_days_ago: 3 });
    }),
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

async function runOnce() {
  const root = () => withSpan("agent", {}, agent);
  if (!args.wrapped) return root();
  const workflow = { "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent" };
  return withSpan("invoke_workflow agent", workflow, root);
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

async function runAndFlush() {
  await runOnce();
  // Mastra hands its spans to the exporter after their run (its event bus, then the
  // OtelExporter's BatchSpanProcessor: 5 s or 512 spans), long after the application's
  // root was written. Flushed after each run, as Mastra's docs tell an application whose
  // process may stop once a request is done: each run's spans follow its root in the file.
  await observability.flush();
}

await runAndFlush(); // the warm-up: connections, Mastra's first use; its spans dropped
exporter.open = true;
INTERVALS.length = 0;
for await (const _ of orders()) {
  anchorClock();
  await runAndFlush();
}
await provider.forceFlush();
writeFileSync(
  args.traces + ".intervals.json",
  // BigInts written as JSON integers, exact.
  JSON.stringify(INTERVALS, (_key, value) => (typeof value === "bigint" ? `#${value}#` : value)).replace(
    /"#(\d+)#"/g,
    "$1",
  ),
);
process.exit(0);
