// The interop agent on Genkit for Go, traced by Genkit's own OpenTelemetry spans.
//
// The same five steps as the Python agents (../_agent.py) and Genkit's Node agent
// (../node/genkit/agent.mjs), as a Go user writes them with Genkit: the agent a Genkit
// flow (genkit.DefineFlow), the retrieval a span of the OpenTelemetry API as in the Node
// agents, the plan genkit.Generate offered a Genkit tool (genkit.DefineTool) with
// ai.WithMaxTurns, the fan-out two genkit.Generate in goroutines, the answer
// genkit.GenerateStream read to its end. The model is the sim, through the
// OpenAI-compatible plugin (plugins/compat_oai: the openai-go SDK, /v1/chat/completions).
//
//	agent --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]
//
// Genkit traces every action itself (its genkit:* attributes) with the global
// OpenTelemetry tracer provider when it is the SDK's (core/tracing: TracerProvider), so the
// application sets one up before genkit.Init, as Genkit's Google Cloud plugin does: an SDK
// TracerProvider with a batching span processor (sdktrace.WithBatcher) and an exporter.
// --httpx: the openai-go client sends through otelhttp's transport (HTTP CLIENT spans
// around each request), the Go counterpart of instrument_httpx(). --wrapped: the flow runs
// inside a workflow span of the GenAI convention (invoke_workflow agent), written with the
// OpenTelemetry API; Genkit starts a flow's span in the caller's context, so it is that
// span's child.
//
// Spans are written as OTLP JSON lines, one {"resourceSpans": [...]} per exported batch
// (as chainlat's JsonLinesSpanExporter writes): the OTLP protobuf messages
// (go.opentelemetry.io/proto/otlp) in protobuf's JSON mapping with OTLP's exceptions (ids
// in hex, enums as numbers). Spans that started before the recorded runs (the warm-up's)
// are dropped. The intervals of the retrieval's and the tool's own functions go to
// FILE.intervals.json, on the spans' clock (time.Now, in ns).
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai"
	"github.com/openai/openai-go/option"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	_ "modernc.org/sqlite"
)

// The steps, their latencies and prompts: as ../_agent.py.
const (
	planModel      = "sim-plan"
	fastModel      = "sim-fast"
	answerModel    = "sim-answer"
	maxToolRounds  = 3
	retrieveMs     = 30
	toolMs         = 25
	question       = "Where is my order A-1042, and can I still return it?"
	system         = "You are a support agent. Use the tools when an order number is mentioned."
	toolName       = "lookup_order"
	toolDesc       = "Look up an order's status by its id."
	summaryPrompt  = "Summarise the order status in one sentence: "
	policyPrompt   = "Say whether the return policy allows a return now: "
	answerPrompt   = "Write the answer to the customer from these notes: "
	recordedRuns   = 5
	readyLine      = "@@chainlat-interop ready"
	doneLine       = "@@chainlat-interop done"
	providerName   = "sim"
	serviceName    = "interop-genkit-go"
	appTracerName  = "interop-app"
	exportTimeout  = 30 * time.Second
	intervalSuffix = ".intervals.json"
)

var toolParameters = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"order_id": map[string]any{"type": "string", "description": "The order id."},
	},
	"required": []any{"order_id"},
}

var docs = [][2]string{
	{"returns", "Orders can be returned within 30 days of delivery for a full refund."},
	{"shipping", "Orders ship within two days; tracking is sent by email."},
	{"order status", "The order status page shows where an order is and when it arrives."},
	{"warranty", "Devices carry a two year warranty against defects."},
}

// --- the steps' own intervals --------------------------------------------------------

type interval struct {
	Kind    string `json:"kind"`
	StartNs int64  `json:"start_ns"`
	EndNs   int64  `json:"end_ns"`
}

var (
	intervalsMu sync.Mutex
	intervals   []interval
)

// ownInterval records the interval of a step's own function (data or tool) on the spans'
// clock: the OpenTelemetry Go SDK times spans with time.Now.
func ownInterval(kind string, fn func()) {
	start := time.Now().UnixNano()
	defer func() {
		end := time.Now().UnixNano()
		intervalsMu.Lock()
		intervals = append(intervals, interval{kind, start, end})
		intervalsMu.Unlock()
	}()
	fn()
}

// --- tracing -------------------------------------------------------------------------

// jsonLinesExporter writes each exported batch as one OTLP JSON request on a line of its
// own; spans that started before openedAt (nanoseconds, 0: not yet open) are dropped.
type jsonLinesExporter struct {
	mu       sync.Mutex
	file     *os.File
	openedAt atomic.Int64
}

func newJSONLinesExporter(path string) (*jsonLinesExporter, error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &jsonLinesExporter{file: file}, nil
}

func (e *jsonLinesExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	opened := e.openedAt.Load()
	kept := make([]sdktrace.ReadOnlySpan, 0, len(spans))
	for _, span := range spans {
		if opened != 0 && span.StartTime().UnixNano() >= opened {
			kept = append(kept, span)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	line, err := otlpJSON(kept)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err = e.file.Write(append(line, '\n'))
	return err
}

func (e *jsonLinesExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.file.Close()
}

// otlpJSON is the OTLP JSON encoding of an ExportTraceServiceRequest holding spans.
func otlpJSON(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	request := &collectortrace.ExportTraceServiceRequest{}
	resources := map[*sdkresource.Resource]*tracepb.ResourceSpans{}
	scopes := map[*tracepb.ResourceSpans]map[string]*tracepb.ScopeSpans{}
	for _, span := range spans {
		res := span.Resource()
		rs, ok := resources[res]
		if !ok {
			rs = &tracepb.ResourceSpans{
				Resource:  &resourcepb.Resource{Attributes: keyValues(res.Attributes())},
				SchemaUrl: res.SchemaURL(),
			}
			resources[res] = rs
			scopes[rs] = map[string]*tracepb.ScopeSpans{}
			request.ResourceSpans = append(request.ResourceSpans, rs)
		}
		scope := span.InstrumentationScope()
		key := scope.Name + "\x00" + scope.Version
		ss, ok := scopes[rs][key]
		if !ok {
			ss = &tracepb.ScopeSpans{
				Scope:     &commonpb.InstrumentationScope{Name: scope.Name, Version: scope.Version},
				SchemaUrl: scope.SchemaURL,
			}
			scopes[rs][key] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, spanProto(span))
	}
	body, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(request)
	if err != nil {
		return nil, err
	}
	return hexIDs(body)
}

func spanProto(span sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := span.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	out := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   span.Name(),
		Kind:                   tracepb.Span_SpanKind(span.SpanKind()),
		StartTimeUnixNano:      uint64(span.StartTime().UnixNano()),
		EndTimeUnixNano:        uint64(span.EndTime().UnixNano()),
		Attributes:             keyValues(span.Attributes()),
		DroppedAttributesCount: uint32(span.DroppedAttributes()),
		DroppedEventsCount:     uint32(span.DroppedEvents()),
		DroppedLinksCount:      uint32(span.DroppedLinks()),
		Flags:                  uint32(sc.TraceFlags()),
	}
	if parent := span.Parent(); parent.SpanID().IsValid() {
		pid := parent.SpanID()
		out.ParentSpanId = pid[:]
	}
	for _, event := range span.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{
			TimeUnixNano:           uint64(event.Time.UnixNano()),
			Name:                   event.Name,
			Attributes:             keyValues(event.Attributes),
			DroppedAttributesCount: uint32(event.DroppedAttributeCount),
		})
	}
	for _, link := range span.Links() {
		ltid, lsid := link.SpanContext.TraceID(), link.SpanContext.SpanID()
		out.Links = append(out.Links, &tracepb.Span_Link{
			TraceId:    ltid[:],
			SpanId:     lsid[:],
			Attributes: keyValues(link.Attributes),
		})
	}
	status := span.Status()
	switch status.Code {
	case codes.Error:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: status.Description}
	case codes.Ok:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return out
}

func keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(attrs))
	for _, kv := range attrs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE:
		var values []*commonpb.AnyValue
		switch v.Type() {
		case attribute.BOOLSLICE:
			for _, b := range v.AsBoolSlice() {
				values = append(values, anyValue(attribute.BoolValue(b)))
			}
		case attribute.INT64SLICE:
			for _, i := range v.AsInt64Slice() {
				values = append(values, anyValue(attribute.Int64Value(i)))
			}
		case attribute.FLOAT64SLICE:
			for _, f := range v.AsFloat64Slice() {
				values = append(values, anyValue(attribute.Float64Value(f)))
			}
		default:
			for _, s := range v.AsStringSlice() {
				values = append(values, anyValue(attribute.StringValue(s)))
			}
		}
		array := &commonpb.ArrayValue{Values: values}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: array}}
	default:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.Emit()}}
	}
}

// hexIDs rewrites protobuf's JSON mapping of the ids (bytes: base64) as OTLP JSON spells
// them: lowercase hex (traceId, spanId, parentSpanId, a link's traceId and spanId).
func hexIDs(body []byte) ([]byte, error) {
	var request map[string]any
	decoder := json.NewDecoder(strings.NewReader(string(body)))
	decoder.UseNumber() // 64-bit integers are strings already; doubles stay as written
	if err := decoder.Decode(&request); err != nil {
		return nil, err
	}
	var walk func(node any) error
	walk = func(node any) error {
		switch n := node.(type) {
		case map[string]any:
			for key, value := range n {
				switch key {
				case "traceId", "spanId", "parentSpanId":
					text, _ := value.(string)
					raw, err := base64.StdEncoding.DecodeString(text)
					if err != nil {
						return fmt.Errorf("%s: %w", key, err)
					}
					n[key] = hex.EncodeToString(raw)
				case "resource", "attributes":
					// no ids inside
				default:
					if err := walk(value); err != nil {
						return err
					}
				}
			}
		case []any:
			for _, item := range n {
				if err := walk(item); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(request); err != nil {
		return nil, err
	}
	var out strings.Builder
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(request); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(out.String(), "\n")), nil
}

// --- the steps -----------------------------------------------------------------------

type agent struct {
	g      *genkit.Genkit
	db     *sql.DB
	tracer trace.Tracer
	tool   ai.Tool
}

func newIndex() (*sql.DB, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one connection: each would be a database of its own
	if _, err := db.Exec("CREATE VIRTUAL TABLE docs USING fts5(title, body)"); err != nil {
		return nil, err
	}
	for _, doc := range docs {
		if _, err := db.Exec("INSERT INTO docs VALUES (?, ?)", doc[0], doc[1]); err != nil {
			return nil, err
		}
	}
	return db, nil
}

func words(text string) []string {
	var out []string
	for _, w := range strings.Fields(strings.ToLower(text)) {
		out = append(out, strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				return r
			}
			return -1
		}, w))
	}
	return out
}

// searchIndex is the keyword search, after retrieveMs standing in for a remote index.
func (a *agent) searchIndex(query string, k int) ([]string, error) {
	var found []string
	var err error
	ownInterval("data", func() {
		time.Sleep(retrieveMs * time.Millisecond)
		var terms []string
		for _, w := range words(query) {
			if len([]rune(w)) > 3 {
				terms = append(terms, w)
			}
		}
		var rows *sql.Rows
		rows, err = a.db.Query(
			"SELECT body FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?",
			strings.Join(terms, " OR "), k,
		)
		if err != nil {
			return
		}
		defer rows.Close()
		for rows.Next() {
			var body string
			if err = rows.Scan(&body); err != nil {
				return
			}
			found = append(found, body)
		}
		err = rows.Err()
	})
	return found, err
}

// withSpan runs fn in a span of the application's tracer, recording its error.
func (a *agent) withSpan(ctx context.Context, name string, attrs []attribute.KeyValue, fn func(context.Context) error) error {
	ctx, span := a.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	defer span.End()
	if err := fn(ctx); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
		return err
	}
	return nil
}

// retrieve: Genkit's retrievers stand for vector stores and embedders; the keyword search
// is the span a Go user writes, of the GenAI convention, as in the Node agents.
func (a *agent) retrieve(ctx context.Context) ([]string, error) {
	var found []string
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "retrieval"),
		attribute.String("gen_ai.data_source.id", "faq-index"),
	}
	err := a.withSpan(ctx, "retrieval faq-index", attrs, func(context.Context) error {
		var err error
		found, err = a.searchIndex(question, 2)
		return err
	})
	return found, err
}

// orderStatus is lookup_order's result; compat_oai sends it as encoding/json writes it.
type orderStatus struct {
	OrderID          string `json:"order_id"`
	Status           string `json:"status"`
	DeliveredDaysAgo int    `json:"delivered_days_ago"`
}

// lookupOrder is the tool's function: the order's status, after toolMs (a slow internal
// API). Its input follows the reference's JSON schema (ai.WithInputSchema), so it comes as
// a map.
func lookupOrder(_ *ai.ToolContext, input any) (orderStatus, error) {
	orderID := "A-1042"
	if args, ok := input.(map[string]any); ok {
		if id, ok := args["order_id"].(string); ok {
			orderID = id
		}
	}
	ownInterval("tool", func() { time.Sleep(toolMs * time.Millisecond) })
	return orderStatus{OrderID: orderID, Status: "shipped", DeliveredDaysAgo: 3}, nil
}

func (a *agent) model(name string) ai.GenerateOption {
	return ai.WithModelName(providerName + "/" + name)
}

// flow is the agent: the five steps, as a Genkit flow's function.
func (a *agent) flow(ctx context.Context, _ struct{}) (string, error) {
	found, err := a.retrieve(ctx)
	if err != nil {
		return "", err
	}
	plan, err := genkit.Generate(ctx, a.g,
		a.model(planModel),
		ai.WithSystem(system),
		ai.WithPrompt(question+"\n\nDocuments:\n"+strings.Join(found, "\n")),
		ai.WithTools(a.tool),
		ai.WithMaxTurns(maxToolRounds),
	)
	if err != nil {
		return "", err
	}
	notes := plan.Text()

	prompts := [2]string{summaryPrompt, policyPrompt}
	var texts [2]string
	var errs [2]error
	var wg sync.WaitGroup
	for i, prompt := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			texts[i], errs[i] = genkit.GenerateText(ctx, a.g, a.model(fastModel), ai.WithPrompt(prompt+notes))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", err
		}
	}

	answer := ""
	stream := genkit.GenerateStream(ctx, a.g, a.model(answerModel), ai.WithPrompt(answerPrompt+texts[0]+texts[1]))
	for value, err := range stream {
		// read to its end, as a server streaming the answer on
		if err != nil {
			return "", err
		}
		if value.Done {
			answer = value.Response.Text()
		}
	}
	return answer, nil
}

// --- main ----------------------------------------------------------------------------

func main() {
	traces := flag.String("traces", "", "the OTLP JSON lines file")
	baseURL := flag.String("base-url", "", "the sim's OpenAI base URL (http://127.0.0.1:PORT/v1)")
	wrapped := flag.Bool("wrapped", false, "run the flow inside an invoke_workflow span")
	httpx := flag.Bool("httpx", false, "trace the HTTP client (otelhttp)")
	paced := flag.Bool("paced", false, "run once per 'run' line on standard input")
	flag.Parse()
	if *traces == "" || *baseURL == "" {
		fmt.Fprintln(os.Stderr, "usage: agent --traces FILE --base-url URL [--wrapped] [--httpx] [--paced]")
		os.Exit(2)
	}
	if err := run(*traces, *baseURL, *wrapped, *httpx, *paced); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(traces, baseURL string, wrapped, httpx, paced bool) error {
	ctx := context.Background()
	exporter, err := newJSONLinesExporter(traces)
	if err != nil {
		return err
	}
	res, err := sdkresource.Merge(sdkresource.Default(), sdkresource.NewSchemaless(
		attribute.String("service.name", serviceName),
	))
	if err != nil {
		return err
	}
	// The provider before genkit.Init: Genkit's tracer is the global provider's when it is
	// the SDK's (core/tracing.TracerProvider).
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)

	opts := []option.RequestOption{option.WithMaxRetries(0)}
	if httpx {
		client := &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport)}
		opts = append(opts, option.WithHTTPClient(client))
	}
	g := genkit.Init(ctx, genkit.WithPlugins(&compat_oai.OpenAICompatible{
		Provider: providerName,
		BaseURL:  baseURL,
		APIKey:   "sk-interop",
		Opts:     opts,
	}))
	db, err := newIndex()
	if err != nil {
		return fmt.Errorf("the index: %w", err)
	}
	a := &agent{g: g, db: db, tracer: otel.Tracer(appTracerName)}
	a.tool = genkit.DefineTool(g, toolName, toolDesc, lookupOrder, ai.WithInputSchema(toolParameters))
	agentFlow := genkit.DefineFlow(g, "agent", a.flow)

	runOnce := func() error {
		if !wrapped {
			_, err := agentFlow.Run(ctx, struct{}{})
			return err
		}
		attrs := []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "invoke_workflow"),
			attribute.String("gen_ai.workflow.name", "agent"),
		}
		return a.withSpan(ctx, "invoke_workflow agent", attrs, func(ctx context.Context) error {
			_, err := agentFlow.Run(ctx, struct{}{})
			return err
		})
	}

	if err := runOnce(); err != nil { // the warm-up: connections, Genkit's first use
		return fmt.Errorf("warm-up: %w", err)
	}
	exporter.openedAt.Store(time.Now().UnixNano())
	intervalsMu.Lock()
	intervals = nil
	intervalsMu.Unlock()
	if err := orders(paced, runOnce); err != nil {
		return err
	}

	flushCtx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	if err := provider.ForceFlush(flushCtx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := provider.Shutdown(flushCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	written, err := json.Marshal(intervals)
	if err != nil {
		return err
	}
	return os.WriteFile(traces+intervalSuffix, written, 0o644)
}

// orders runs the recorded runs: recordedRuns of them, or, paced, one per "run" line on
// standard input, saying readyLine first and doneLine after each (../_agent.py, _orders).
func orders(paced bool, runOnce func() error) error {
	if !paced {
		for range recordedRuns {
			if err := runOnce(); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Println(readyLine)
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		if strings.TrimSpace(lines.Text()) != "run" {
			break
		}
		if err := runOnce(); err != nil {
			return err
		}
		fmt.Println(doneLine)
	}
	return lines.Err()
}
