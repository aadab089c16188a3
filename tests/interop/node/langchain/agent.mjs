// The interop agent as a LangGraph.js graph (Node.js), traced by OpenInference's
// LangChain.js instrumentation.
//
// The same five steps as the Python agents (../../_agent.py), as the Python LangGraph agent
// (../../agents/openinference-langchain.py) writes them, every step LangChain's: a
// `BaseRetriever` over the index (an OpenInference RETRIEVER span), `ChatOpenAI` with the
// tool bound, LangGraph's `ToolNode` running the tool, two nodes of one superstep run
// together, and an answer node that streams. The model is the sim through `ChatOpenAI`'s
// `configuration.baseURL` (the openai SDK, /v1/chat/completions through Node's fetch).
//
//   node agent.mjs --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// OpenInference's `LangChainInstrumentation` is set up as its README tells a user:
// `manuallyInstrument` of @langchain/core's callbacks manager module. Unwrapped, the graph's
// own span (`LangGraph`, an OpenInference CHAIN) is the run's root. --wrapped: a workflow
// span of the GenAI convention (`invoke_workflow agent`) around it. --httpx: OpenTelemetry
// JS's undici instrumentation (HTTP CLIENT spans around each request of Node's fetch), the
// Node counterpart of instrument_httpx().
//
// Spans are written as OTLP JSON lines (one `{"resourceSpans": [...]}` per export, as
// chainlat's JsonLinesSpanExporter writes), each span when it ends; the warm-up's are
// dropped. The intervals of the retrieval's and the tool's own functions go to
// FILE.intervals.json, on the spans' clock (the wall clock, in ns).

import { LangChainInstrumentation } from "@arizeai/openinference-instrumentation-langchain";
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
  searchIndex,
} from "./harness.mjs"; // ../harness.mjs, copied beside this file by node_stack.py

const args = agentArgs();

const exporter = new JsonLinesSpanExporter(args.traces, JsonTraceSerializer, ExportResultCode);
const processor = new SimpleSpanProcessor(exporter);
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "interop-langchain-js" }),
  spanProcessors: [processor],
});
provider.register();
if (args.httpx) {
  // Before the first request: the instrumentation subscribes to undici's diagnostics
  // channels, which Node's global fetch (the openai SDK's) publishes to.
  registerInstrumentations({ tracerProvider: provider, instrumentations: [new UndiciInstrumentation()] });
}

// LangChain is imported after the provider is global, as an application does at start-up.
const CallbackManagerModule = await import("@langchain/core/callbacks/manager");
new LangChainInstrumentation({ tracerProvider: provider }).manuallyInstrument(CallbackManagerModule);

const { BaseRetriever } = await import("@langchain/core/retrievers");
const { Document } = await import("@langchain/core/documents");
const { HumanMessage, SystemMessage } = await import("@langchain/core/messages");
const { tool } = await import("@langchain/core/tools");
const { ChatOpenAI } = await import("@langchain/openai");
const { Annotation, END, START, StateGraph, messagesStateReducer } = await import("@langchain/langgraph");
const { ToolNode } = await import("@langchain/langgraph/prebuilt");

const { wrappedIf } = applicationSpans(trace.getTracer("interop-app"), SpanStatusCode);

// --- the steps --------------------------------------------------------------------------
class FaqRetriever extends BaseRetriever {
  lc_namespace = ["interop", "retrievers"];

  async _getRelevantDocuments(query) {
    return (await searchIndex(query)).map((body) => new Document({ pageContent: body }));
  }
}

// The reference's JSON schema as it is (LangChain.js takes a JSON schema as well as zod's).
const lookupOrder = tool(async ({ order_id }) => ownLookupOrder(order_id), {
  name: TOOL_NAME,
  description: TOOL_DESCRIPTION,
  schema: TOOL_PARAMETERS,
});

const chat = (model) =>
  new ChatOpenAI({
    model,
    apiKey: "sk-interop",
    configuration: { baseURL: args["base-url"] },
    maxRetries: 0,
    streamUsage: true,
  });

const retriever = new FaqRetriever();
const planner = chat(PLAN_MODEL).bindTools([lookupOrder]);
const fast = chat(FAST_MODEL);
const answerer = chat(ANSWER_MODEL);

const State = Annotation.Root({
  messages: Annotation({ reducer: messagesStateReducer, default: () => [] }),
  notes: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

async function retrieve() {
  const docs = (await retriever.invoke(QUESTION)).map((d) => d.pageContent);
  const prompt = QUESTION + "\n\nDocuments:\n" + docs.join("\n");
  return { messages: [new SystemMessage(SYSTEM), new HumanMessage(prompt)] };
}

async function plan(state) {
  return { messages: [await planner.invoke(state.messages)] };
}

function route(state) {
  return state.messages.at(-1).tool_calls?.length ? "tools" : ["summary", "policy"];
}

function ask(prompt) {
  return async (state) => {
    const reply = await fast.invoke(prompt + String(state.messages.at(-1).content));
    return { notes: [String(reply.content)] };
  };
}

async function answer(state) {
  for await (const _chunk of await answerer.stream(ANSWER_PROMPT + state.notes.join(""))) {
    // read to its end, as a client streaming the answer on
  }
  return {};
}

const app = new StateGraph(State)
  .addNode("retrieve", retrieve)
  .addNode("plan", plan)
  .addNode("tools", new ToolNode([lookupOrder]))
  .addNode("summary", ask(SUMMARY_PROMPT))
  .addNode("policy", ask(POLICY_PROMPT))
  .addNode("answer", answer)
  .addEdge(START, "retrieve")
  .addEdge("retrieve", "plan")
  .addConditionalEdges("plan", route, ["tools", "summary", "policy"])
  .addEdge("tools", "plan")
  .addEdge(["summary", "policy"], "answer")
  .addEdge("answer", END)
  .compile();

await record({
  paced: args.paced,
  traces: args.traces,
  exporter,
  runOnce: () => wrappedIf(args.wrapped, () => app.invoke({ messages: [], notes: [] })),
  finish: () => processor.forceFlush(),
});
