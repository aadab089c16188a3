// The interop agent in Java: Spring AI 2 on Spring Boot 4, traced by its observations.
//
// The same five steps as the Python agents (../../../../../../_agent.py), as a Spring
// user writes them: the retrieval as a span of the OpenTelemetry API (Spring AI's
// retrieval is a VectorStore, and the agent's index is a keyword one), the plan as a
// ChatClient call offered a FunctionToolCallback (Spring AI runs the tool loop itself),
// the fan-out as two ChatClient calls on two threads, the answer as a ChatClient stream
// read to its end (`.stream().content()`).
//
//   java -jar agent.jar --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// Tracing is Spring Boot's: Spring AI's observations (ChatClient, ChatModel, tool calls)
// become OpenTelemetry spans through Micrometer Tracing's OTel bridge
// (spring-boot-starter-opentelemetry), sampled at 1.0. --httpx: the OpenAI client's own
// HTTP observation (`okhttp.requests`, Micrometer's OkHttpObservationInterceptor, which
// Spring AI 2 installs on its OkHttp client) is on, as by default; without it the
// application turns it off (`management.observations.enable.okhttp.requests=false`), so
// the model calls are seen by Spring AI's spans alone. --wrapped: there is no chainlat in
// Java; the application's root span `agent` is wrapped in a workflow span of the GenAI
// convention (`invoke_workflow agent`), written with the OpenTelemetry API.
//
// Spans are written as OTLP JSON lines (one `{"resourceSpans": [...]}` per export, as
// chainlat's JsonLinesSpanExporter writes), by a SpanExporter bean that serializes with
// the OTLP exporter's own marshaler; spans that started before the recorded runs (the
// warm-up's) are dropped. The intervals of the retrieval's and the tool's own functions
// go to FILE.intervals.json, on the spans' clock (the wall clock, in ns).
package chainlat.interop;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.exporter.internal.otlp.traces.TraceRequestMarshaler;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import org.springframework.ai.chat.client.ChatClient;
import org.springframework.ai.openai.OpenAiChatOptions;
import org.springframework.ai.tool.ToolCallback;
import org.springframework.ai.tool.function.FunctionToolCallback;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

@SpringBootApplication
public class Agent {

    // The steps, their latencies and prompts: as ../_agent.py.
    static final String PLAN_MODEL = "sim-plan";
    static final String FAST_MODEL = "sim-fast";
    static final String ANSWER_MODEL = "sim-answer";
    static final long RETRIEVE_MS = 30;
    static final long TOOL_MS = 25;
    static final String QUESTION = "Where is my order A-1042, and can I still return it?";
    static final String SYSTEM =
            "You are a support agent. Use the tools when an order number is mentioned.";
    static final String TOOL_NAME = "lookup_order";
    static final String TOOL_DESCRIPTION = "Look up an order's status by its id.";
    // The reference's JSON schema as it is: Spring AI's generated one adds
    // `additionalProperties` and `$schema`, more input tokens per planning call.
    static final String TOOL_PARAMETERS =
            "{\"type\": \"object\", \"properties\": {\"order_id\": {\"type\": \"string\","
                    + " \"description\": \"The order id.\"}}, \"required\": [\"order_id\"]}";
    static final String SUMMARY_PROMPT = "Summarise the order status in one sentence: ";
    static final String POLICY_PROMPT = "Say whether the return policy allows a return now: ";
    static final String ANSWER_PROMPT = "Write the answer to the customer from these notes: ";
    static final String[][] DOCS = {
        {"returns", "Orders can be returned within 30 days of delivery for a full refund."},
        {"shipping", "Orders ship within two days; tracking is sent by email."},
        {"order status", "The order status page shows where an order is and when it arrives."},
        {"warranty", "Devices carry a two year warranty against defects."},
    };
    static final int RECORDED_RUNS = 5;
    static final String READY = "@@chainlat-interop ready";
    static final String DONE = "@@chainlat-interop done";

    // --- the command line -------------------------------------------------------------
    record Case(String traces, String baseUrl, boolean wrapped, boolean httpx, boolean paced) {

        static Case parse(String[] args) {
            Map<String, String> values = new HashMap<>();
            List<String> flags = new ArrayList<>();
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--traces", "--base-url" -> values.put(args[i], args[++i]);
                    case "--wrapped", "--httpx", "--paced" -> flags.add(args[i]);
                    default -> usage("unknown argument " + args[i]);
                }
            }
            if (!values.containsKey("--traces") || !values.containsKey("--base-url")) {
                usage("--traces and --base-url are required");
            }
            return new Case(
                    values.get("--traces"),
                    values.get("--base-url"),
                    flags.contains("--wrapped"),
                    flags.contains("--httpx"),
                    flags.contains("--paced"));
        }

        static void usage(String why) {
            System.err.println(
                    why + "\nusage: java -jar agent.jar --traces FILE --base-url URL"
                            + " [--wrapped] [--httpx] [--paced]");
            System.exit(2);
        }
    }

    // --- the spans' clock -------------------------------------------------------------
    // OpenTelemetry Java dates a trace's spans from one reading of the wall clock at its
    // root, then System.nanoTime(); the own intervals are read the same way, anchored at
    // the start of each run.
    static long anchorEpochNanos;
    static long anchorNanoTime;

    static void anchorClock() {
        anchorEpochNanos = io.opentelemetry.sdk.common.Clock.getDefault().now();
        anchorNanoTime = System.nanoTime();
    }

    static long wallNanos() {
        return anchorEpochNanos + (System.nanoTime() - anchorNanoTime);
    }

    static final List<long[]> DATA_INTERVALS = new ArrayList<>();
    static final List<long[]> TOOL_INTERVALS = new ArrayList<>();

    static synchronized void record(List<long[]> into, long start) {
        into.add(new long[] {start, wallNanos()});
    }

    // --- tracing ----------------------------------------------------------------------
    /** One OTLP JSON request ({"resourceSpans": [...]}) per line; nothing before `open`. */
    static final class JsonLinesSpanExporter implements SpanExporter {
        private final OutputStream out;
        /** Spans that started before this instant (the warm-up's) are dropped. */
        volatile long openedEpochNanos = Long.MAX_VALUE;

        JsonLinesSpanExporter(String path) {
            try {
                out = new FileOutputStream(path, false);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public synchronized CompletableResultCode export(Collection<SpanData> spans) {
            List<SpanData> kept =
                    spans.stream()
                            .filter(s -> s.getStartEpochNanos() >= openedEpochNanos)
                            .collect(Collectors.toList());
            if (kept.isEmpty()) {
                return CompletableResultCode.ofSuccess();
            }
            try {
                ByteArrayOutputStream line = new ByteArrayOutputStream();
                TraceRequestMarshaler.create(kept).writeJsonTo(line);
                line.write('\n');
                line.writeTo(out);
                out.flush();
                return CompletableResultCode.ofSuccess();
            } catch (IOException e) {
                return CompletableResultCode.ofFailure();
            }
        }

        @Override
        public CompletableResultCode flush() {
            return CompletableResultCode.ofSuccess();
        }

        @Override
        public synchronized CompletableResultCode shutdown() {
            try {
                out.close();
            } catch (IOException e) {
                return CompletableResultCode.ofFailure();
            }
            return CompletableResultCode.ofSuccess();
        }
    }

    static Case theCase;

    // static: the exporter is made before the tracer provider, which the agent (this
    // configuration class) depends on.
    @Bean
    static JsonLinesSpanExporter jsonLinesSpanExporter() {
        return new JsonLinesSpanExporter(theCase.traces());
    }

    // --- the steps --------------------------------------------------------------------
    static final class Index {
        private final Connection db;
        private final PreparedStatement search;

        Index() throws SQLException {
            db = DriverManager.getConnection("jdbc:sqlite::memory:");
            try (Statement create = db.createStatement()) {
                create.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body)");
            }
            try (PreparedStatement insert = db.prepareStatement("INSERT INTO docs VALUES (?, ?)")) {
                for (String[] doc : DOCS) {
                    insert.setString(1, doc[0]);
                    insert.setString(2, doc[1]);
                    insert.executeUpdate();
                }
            }
            search = db.prepareStatement(
                    "SELECT body FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?");
        }

        /** The `k` best documents for the words of `query`, after RETRIEVE_MS. */
        synchronized List<String> search(String query, int k) throws Exception {
            long start = wallNanos();
            try {
                Thread.sleep(RETRIEVE_MS);
                String match =
                        Arrays.stream(query.toLowerCase(Locale.ROOT).split("\\s+"))
                                .map(w -> w.codePoints()
                                        .filter(Character::isLetterOrDigit)
                                        .collect(StringBuilder::new,
                                                StringBuilder::appendCodePoint,
                                                StringBuilder::append)
                                        .toString())
                                .filter(w -> w.length() > 3)
                                .collect(Collectors.joining(" OR "));
                search.setString(1, match);
                search.setInt(2, k);
                List<String> bodies = new ArrayList<>();
                try (ResultSet rows = search.executeQuery()) {
                    while (rows.next()) {
                        bodies.add(rows.getString(1));
                    }
                }
                return bodies;
            } finally {
                record(DATA_INTERVALS, start);
            }
        }
    }

    record OrderQuery(String order_id) {}

    /** The order's status, after TOOL_MS (a slow internal API); Python's json.dumps text. */
    static String lookupOrder(OrderQuery query) {
        long start = wallNanos();
        try {
            Thread.sleep(TOOL_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            record(TOOL_INTERVALS, start);
        }
        String id = query == null || query.order_id() == null ? "A-1042" : query.order_id();
        return "{\"order_id\": \"" + id + "\", \"status\": \"shipped\", \"delivered_days_ago\": 3}";
    }

    static final ToolCallback LOOKUP_ORDER =
            FunctionToolCallback.builder(TOOL_NAME, Agent::lookupOrder)
                    .description(TOOL_DESCRIPTION)
                    .inputType(OrderQuery.class)
                    .inputSchema(TOOL_PARAMETERS)
                    // The text as the function returns it (the default converter would
                    // quote it as a JSON string).
                    .toolCallResultConverter((result, type) -> String.valueOf(result))
                    .build();

    private final ChatClient chat;
    private final Tracer tracer;
    private final Index index;
    private final ExecutorService pool;

    Agent(ChatClient.Builder chat, OpenTelemetry openTelemetry) throws SQLException {
        this.chat = chat.build();
        this.tracer = openTelemetry.getTracer("interop-app");
        this.index = new Index();
        // Context.taskWrapping: the OpenTelemetry context goes to the threads, so the
        // calls made there keep their parent (as Python's bind_context).
        this.pool = Context.taskWrapping(Executors.newFixedThreadPool(2));
    }

    <T> T withSpan(String name, Attributes attributes, Callable<T> body) throws Exception {
        Span span = tracer.spanBuilder(name).setAllAttributes(attributes).startSpan();
        try (Scope ignored = span.makeCurrent()) {
            return body.call();
        } catch (Exception e) {
            span.recordException(e);
            span.setStatus(StatusCode.ERROR, String.valueOf(e.getMessage()));
            span.setAttribute("error.type", e.getClass().getName());
            throw e;
        } finally {
            span.end();
        }
    }

    List<String> retrieve() throws Exception {
        // The span a user writes around a data step, of the GenAI convention.
        Attributes attributes =
                Attributes.of(
                        AttributeKey.stringKey("gen_ai.operation.name"), "retrieval",
                        AttributeKey.stringKey("gen_ai.data_source.id"), "faq-index");
        return withSpan("retrieval faq-index", attributes, () -> index.search(QUESTION, 2));
    }

    String ask(String prompt, String notes) {
        return chat.prompt()
                .user(prompt + notes)
                .options(OpenAiChatOptions.builder().model(FAST_MODEL))
                .call()
                .content();
    }

    void agent() throws Exception {
        List<String> docs = retrieve();
        String notes =
                chat.prompt()
                        .system(SYSTEM)
                        .user(QUESTION + "\n\nDocuments:\n" + String.join("\n", docs))
                        .toolCallbacks(LOOKUP_ORDER)
                        .options(OpenAiChatOptions.builder().model(PLAN_MODEL))
                        .call()
                        .content();
        String known = notes == null ? "" : notes;
        Future<String> summary = pool.submit(() -> ask(SUMMARY_PROMPT, known));
        Future<String> policy = pool.submit(() -> ask(POLICY_PROMPT, known));
        String both = summary.get() + policy.get();
        for (String chunk :
                chat.prompt()
                        .user(ANSWER_PROMPT + both)
                        .options(OpenAiChatOptions.builder().model(ANSWER_MODEL).streamUsage(true))
                        .stream()
                        .content()
                        .toIterable()) {
            // read to its end, as a client streaming the answer on
        }
    }

    void runOnce(boolean wrapped) throws Exception {
        Callable<Void> root =
                () -> withSpan("agent", Attributes.empty(), () -> {
                    agent();
                    return null;
                });
        if (!wrapped) {
            root.call();
            return;
        }
        Attributes workflow =
                Attributes.of(
                        AttributeKey.stringKey("gen_ai.operation.name"), "invoke_workflow",
                        AttributeKey.stringKey("gen_ai.workflow.name"), "agent");
        withSpan("invoke_workflow agent", workflow, root);
    }

    // --- the protocol with run.py (../_agent.py, `_orders`) ---------------------------
    public static void main(String[] args) throws Exception {
        theCase = Case.parse(args);
        SpringApplication app = new SpringApplication(Agent.class);
        app.setWebApplicationType(WebApplicationType.NONE);
        Map<String, Object> properties = new HashMap<>();
        properties.put("spring.main.banner-mode", "off");
        properties.put("logging.level.root", "WARN");
        properties.put("spring.application.name", "interop-spring-ai");
        properties.put("spring.ai.openai.base-url", theCase.baseUrl());
        properties.put("spring.ai.openai.api-key", "sk-interop");
        properties.put("spring.ai.openai.max-retries", "0");
        // Every trace kept (Boot samples 10 % by default).
        properties.put("management.tracing.sampling.probability", "1.0");
        properties.put("management.observations.enable.okhttp.requests", theCase.httpx());
        // Traces only, to the file: no OTLP metrics push to a collector that is not there.
        properties.put("management.otlp.metrics.export.enabled", "false");
        app.setDefaultProperties(properties);
        ConfigurableApplicationContext context = app.run();
        Agent agent = context.getBean(Agent.class);
        JsonLinesSpanExporter exporter = context.getBean(JsonLinesSpanExporter.class);

        anchorClock();
        agent.runOnce(theCase.wrapped()); // the warm-up: connections, first use; not kept
        anchorClock();
        exporter.openedEpochNanos = wallNanos();
        DATA_INTERVALS.clear();
        TOOL_INTERVALS.clear();
        if (theCase.paced()) {
            System.out.println(READY);
            System.out.flush();
            BufferedReader in =
                    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null && line.strip().equals("run")) {
                anchorClock();
                agent.runOnce(theCase.wrapped());
                System.out.println(DONE);
                System.out.flush();
            }
        } else {
            for (int i = 0; i < RECORDED_RUNS; i++) {
                anchorClock();
                agent.runOnce(theCase.wrapped());
            }
        }
        agent.pool.shutdown();
        context.close(); // the tracer provider's shutdown: the batch is written
        writeIntervals(theCase.traces() + ".intervals.json");
        System.exit(0);
    }

    static void writeIntervals(String path) throws IOException {
        List<String> items = new ArrayList<>();
        for (long[] interval : DATA_INTERVALS) {
            items.add(interval("data", interval));
        }
        for (long[] interval : TOOL_INTERVALS) {
            items.add(interval("tool", interval));
        }
        Files.writeString(Path.of(path), "[" + String.join(", ", items) + "]");
    }

    static String interval(String kind, long[] interval) {
        return "{\"kind\": \"" + kind + "\", \"start_ns\": " + interval[0]
                + ", \"end_ns\": " + interval[1] + "}";
    }
}
