// A Go application traced with the OpenTelemetry Go SDK that knows nothing of chainlat:
// one workflow run (invoke_workflow support) with one model call (chat gpt-4o-mini) at
// explicit times, exported over OTLP to wherever the SDK's environment variables point
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), over gRPC when
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL is "grpc", else over HTTP/protobuf.
//
//	go run . CHAT_MS
//
// The model call lasts CHAT_MS milliseconds from 1 ms after the workflow starts, and the
// workflow ends 1 ms after it: the run's total is CHAT_MS + 2 ms. A negative CHAT_MS ends
// the call before it starts (the workflow then ends 2 ms after its start).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// t0 is a fixed instant, so that the run's figures are exact.
var t0 = time.Unix(1_700_000_000, 0)

func protocol() string {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return strings.ToLower(strings.TrimSpace(p))
	}
	return strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")))
}

func exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if protocol() == "grpc" {
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

func run(chatMs int) error {
	ctx := context.Background()
	exp, err := exporter(ctx)
	if err != nil {
		return err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "support-agent-go"))
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	tracer := provider.Tracer("support-agent")

	ms := time.Millisecond
	ctx, workflow := tracer.Start(ctx, "invoke_workflow support",
		trace.WithTimestamp(t0),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_workflow"),
			attribute.String("gen_ai.workflow.name", "support"),
		))
	_, chat := tracer.Start(ctx, "chat gpt-4o-mini",
		trace.WithTimestamp(t0.Add(ms)),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "openai"),
			attribute.String("gen_ai.request.model", "gpt-4o-mini"),
			attribute.Bool("gen_ai.request.stream", false), // not streamed: its end is the output
			attribute.String("gen_ai.response.model", "gpt-4o-mini"),
			attribute.Int("gen_ai.usage.input_tokens", 1000),
			attribute.Int("gen_ai.usage.output_tokens", 200),
		))
	chat.End(trace.WithTimestamp(t0.Add(ms + time.Duration(chatMs)*ms)))
	workflow.End(trace.WithTimestamp(t0.Add(2*ms + time.Duration(max(chatMs, 0))*ms)))

	// Shutdown flushes the batch; an export that fails is its error.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return provider.Shutdown(shutdownCtx)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: app CHAT_MS")
		os.Exit(2)
	}
	// A negative CHAT_MS makes a model call that ends before it starts (a clock set back).
	chatMs, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "app: CHAT_MS: expected milliseconds, got %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := run(chatMs); err != nil {
		fmt.Fprintf(os.Stderr, "app: %v\n", err)
		os.Exit(1)
	}
}
