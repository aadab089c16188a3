// What the interop matrix's Node.js agents share, whatever framework they run: the steps'
// constants (as ../_agent.py), the clock of the retrieval's and the tool's own intervals,
// the JSON lines span exporter, the retrieval's index, the application's own spans, and the
// protocol with run.py. Only Node's built-in modules are imported here: each agent passes
// in the packages of its own folder, whose versions differ (Genkit brings OpenTelemetry JS
// 1.x, the AI SDK and Mastra 2.x). node_stack.py copies this file beside each agent, in
// the stack's cached npm folder, so every agent imports it as "./harness.mjs".

import { appendFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";

// --- the steps, their latencies and prompts: as ../_agent.py ----------------------------
export const PLAN_MODEL = "sim-plan";
export const FAST_MODEL = "sim-fast";
export const ANSWER_MODEL = "sim-answer";
export const MAX_TOOL_ROUNDS = 3;
export const RETRIEVE_MS = 30;
export const TOOL_MS = 25;
export const QUESTION = "Where is my order A-1042, and can I still return it?";
export const SYSTEM = "You are a support agent. Use the tools when an order number is mentioned.";
export const TOOL_NAME = "lookup_order";
export const TOOL_DESCRIPTION = "Look up an order's status by its id.";
export const TOOL_PARAMETERS = {
  type: "object",
  properties: { order_id: { type: "string", description: "The order id." } },
  required: ["order_id"],
};
export const SUMMARY_PROMPT = "Summarise the order status in one sentence: ";
export const POLICY_PROMPT = "Say whether the return policy allows a return now: ";
export const ANSWER_PROMPT = "Write the answer to the customer from these notes: ";
const DOCS = [
  ["returns", "Orders can be returned within 30 days of delivery for a full refund."],
  ["shipping", "Orders ship within two days; tracking is sent by email."],
  ["order status", "The order status page shows where an order is and when it arrives."],
  ["warranty", "Devices carry a two year warranty against defects."],
];
const RECORDED_RUNS = 5;
const READY = "@@chainlat-interop ready";
const DONE = "@@chainlat-interop done";

// --- the own intervals' clock -------------------------------------------------------------
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

// --- tracing --------------------------------------------------------------------------------
export class JsonLinesSpanExporter {
  // One OTLP JSON request ({"resourceSpans": [...]}) per line, as chainlat's exporter
  // writes; nothing of the warm-up: no span before `open()`, nor one of a warm-up's trace
  // that a framework ends later (by trace: a span's startTime is on the SDK's performance
  // clock, which may stand milliseconds off Date.now()). `serializer` and `resultCode`:
  // @opentelemetry/otlp-transformer's JsonTraceSerializer and @opentelemetry/core's
  // ExportResultCode, of the agent's own folder.
  constructor(path, serializer, resultCode) {
    this.path = path;
    this.serializer = serializer;
    this.resultCode = resultCode;
    this.isOpen = false;
    this.warmUpTraces = new Set();
    writeFileSync(path, "");
  }
  open() {
    this.isOpen = true;
  }
  export(spans, done) {
    if (!this.isOpen) {
      for (const span of spans) this.warmUpTraces.add(span.spanContext().traceId);
    }
    const kept = this.isOpen
      ? spans.filter((span) => !this.warmUpTraces.has(span.spanContext().traceId))
      : [];
    if (kept.length > 0) {
      try {
        const body = Buffer.from(this.serializer.serializeRequest(kept)).toString("utf8");
        appendFileSync(this.path, body + "\n");
      } catch (error) {
        done({ code: this.resultCode.FAILED, error });
        return;
      }
    }
    done({ code: this.resultCode.SUCCESS });
  }
  shutdown() {
    return Promise.resolve();
  }
  forceFlush() {
    return Promise.resolve();
  }
}

// --- the retrieval and the tool -----------------------------------------------------------
const db = new DatabaseSync(":memory:");
db.exec("CREATE VIRTUAL TABLE docs USING fts5(title, body)");
const insert = db.prepare("INSERT INTO docs VALUES (?, ?)");
for (const [title, body] of DOCS) insert.run(title, body);
const search = db.prepare("SELECT body FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?");

function words(text) {
  return text.toLowerCase().split(/\s+/).map((w) => [...w].filter((c) => /[\p{L}\p{N}]/u.test(c)).join(""));
}

export async function searchIndex(query, k = 2) {
  // The keyword search, after RETRIEVE_MS standing in for a remote index.
  return ownInterval("data", async () => {
    await sleep(RETRIEVE_MS);
    const match = words(query).filter((w) => w.length > 3).join(" OR ");
    return search.all(match, k).map((row) => String(row.body));
  });
}

function pythonJson(object) {
  // The reference's text of the result (Python's json.dumps: ", " and ": "), so that the
  // sim counts the same input tokens for the call that reads it.
  return `{${Object.entries(object).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(", ")}}`;
}

export function lookupOrder(orderId) {
  // The tool's own function: TOOL_MS standing in for an order service, its interval noted.
  return ownInterval("tool", async () => {
    await sleep(TOOL_MS);
    return pythonJson({ order_id: orderId ?? "A-1042", status: "shipped", delivered_days_ago: 3 });
  });
}

// --- the application's own spans ----------------------------------------------------------
export function applicationSpans(tracer, spanStatusCode) {
  // `withSpan`: a span of the application's `tracer` (of @opentelemetry/api) around `fn`,
  // current inside it, ended with an error status when `fn` throws. `retrieve` and
  // `runTool`: the retrieval's and the tool's spans of the GenAI convention, as a Node
  // user writes them.
  async function withSpan(name, attributes, fn) {
    return tracer.startActiveSpan(name, { attributes }, async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        span.recordException(error);
        span.setStatus({ code: spanStatusCode.ERROR, message: String(error?.message ?? error) });
        span.setAttribute("error.type", error?.name ?? "Error");
        throw error;
      } finally {
        span.end();
      }
    });
  }
  function retrieve() {
    const attributes = { "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "faq-index" };
    return withSpan("retrieval faq-index", attributes, () => searchIndex(QUESTION));
  }
  function runTool(orderId) {
    // The tool's span of the GenAI convention, as a Node user writes one.
    const attributes = { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL_NAME };
    return withSpan(`execute_tool ${TOOL_NAME}`, attributes, () => lookupOrder(orderId));
  }
  function wrappedIf(wrapped, root) {
    // The run: `root` alone, or inside a workflow span of the GenAI convention.
    if (!wrapped) return root();
    const workflow = { "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent" };
    return withSpan("invoke_workflow agent", workflow, root);
  }
  return { withSpan, retrieve, runTool, wrappedIf };
}

// --- the reference's loop on the openai SDK -----------------------------------------------
export function openaiAgent({ client, retrieve, runTool }) {
  // The reference's loop (_agent.plain_openai_agent) on an openai SDK `client`, as an async
  // function of no argument: `retrieve()` gives the documents, `runTool(orderId)` the
  // tool's result; each traced as the stack traces them. The agents of langfuse/,
  // openai-openllmetry/ and openai-otel/ run it.
  const tool = {
    type: "function",
    function: { name: TOOL_NAME, description: TOOL_DESCRIPTION, parameters: TOOL_PARAMETERS },
  };
  return async function agent() {
    const docs = await retrieve();
    const messages = [
      { role: "system", content: SYSTEM },
      { role: "user", content: QUESTION + "\n\nDocuments:\n" + docs.join("\n") },
    ];
    let message;
    for (let round = 0; round < MAX_TOOL_ROUNDS; round++) {
      const reply = await client.chat.completions.create({ model: PLAN_MODEL, messages, tools: [tool] });
      message = reply.choices[0].message;
      if (!message.tool_calls?.length) break;
      // The assistant's message as the Python reference sends it back (its fields, none null).
      messages.push({
        role: "assistant",
        tool_calls: message.tool_calls.map((c) => ({
          id: c.id,
          function: { arguments: c.function.arguments, name: c.function.name },
          type: "function",
        })),
      });
      for (const call of message.tool_calls) {
        const result = await runTool(orderIdOf(call.function.arguments));
        messages.push({ role: "tool", tool_call_id: call.id, content: result });
      }
    }
    const notes = String(message?.content ?? "");
    const ask = async (prompt) => {
      const reply = await client.chat.completions.create({
        model: FAST_MODEL,
        messages: [{ role: "user", content: prompt + notes }],
      });
      return String(reply.choices[0].message.content ?? "");
    };
    const [summary, policy] = await Promise.all([ask(SUMMARY_PROMPT), ask(POLICY_PROMPT)]);
    const stream = await client.chat.completions.create({
      model: ANSWER_MODEL,
      messages: [{ role: "user", content: ANSWER_PROMPT + summary + policy }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const _chunk of stream) {
      // read to its end, as a client streaming the answer on
    }
  };
}

export async function recordOpenaiAgent({ OpenAI, args, exporter, provider, tracer, spanStatusCode }) {
  // The agents of openai-openllmetry/ and openai-otel/: `openaiAgent` on a client of the
  // (instrumented) `OpenAI` class, the retrieval and the tool as the application's spans,
  // each run under the application's root span `agent` (in a workflow span when wrapped),
  // recorded as run.py asks; then `provider` flushed and shut down.
  const { withSpan, retrieve, runTool, wrappedIf } = applicationSpans(tracer, spanStatusCode);
  const client = new OpenAI({ baseURL: args["base-url"], apiKey: "sk-interop", maxRetries: 0 });
  const agent = openaiAgent({ client, retrieve, runTool });
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
}

function orderIdOf(args) {
  // The `order_id` of a tool call's JSON arguments (`A-1042` when there is none).
  try {
    return String(JSON.parse(args || "{}").order_id ?? "A-1042");
  } catch {
    return "A-1042";
  }
}

// --- the command line --------------------------------------------------------------------
export function agentArgs(extra = {}, extraUsage = "") {
  // `--traces FILE --base-url URL [--wrapped] [--httpx] [--paced]`, and `extra` options
  // (parseArgs's); a usage line and exit 2 without the first two.
  const { values } = parseArgs({
    options: {
      traces: { type: "string" },
      "base-url": { type: "string" },
      wrapped: { type: "boolean", default: false },
      httpx: { type: "boolean", default: false },
      paced: { type: "boolean", default: false },
      ...extra,
    },
  });
  if (!values.traces || !values["base-url"]) {
    console.error(`usage: node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]${extraUsage}`);
    process.exit(2);
  }
  return values;
}

// --- the protocol with run.py (../_agent.py, `_orders`) -----------------------------------
async function* orders(paced) {
  if (!paced) {
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

export async function record({ paced, traces, exporter, runOnce, finish }) {
  // A warm-up (connections, the framework's first use; its spans dropped), then the
  // recorded runs, as run.py orders them; then `finish` (the agent's flush), the own
  // intervals to TRACES.intervals.json, and exit.
  await runOnce();
  exporter.open();
  INTERVALS.length = 0;
  for await (const _ of orders(paced)) {
    anchorClock();
    await runOnce();
  }
  await finish();
  writeFileSync(
    traces + ".intervals.json",
    // BigInts written as JSON integers, exact.
    JSON.stringify(INTERVALS, (_key, value) => (typeof value === "bigint" ? `#${value}#` : value)).replace(
      /"#(\d+)#"/g,
      "$1",
    ),
  );
  process.exit(0);
}
