// Package telemetry exports voxpipe's turn traces as OpenTelemetry spans
// over OTLP/HTTP: one span per turn (from speech_start to turn_end, or the
// first and last marks the turn has) with a child span per stage, each
// stage running from the previous trace mark to its own. It is off unless a
// collector endpoint is configured (telemetry.otlp_endpoint).
package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/voxpipe/voxpipe/pipeline"
)

// Exporter turns traced turns into spans. Its methods are safe for
// concurrent use; TurnTraced never blocks (spans are batched and sent in
// the background, and dropped when the collector cannot keep up).
type Exporter struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New starts an exporter sending to the OTLP/HTTP collector at endpoint
// (e.g. http://127.0.0.1:4318; spans go to its /v1/traces).
func New(endpoint, service string) (*Exporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telemetry: otlp endpoint %q: want http://host:port or https://host:port", endpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if u.Path != "" && u.Path != "/" {
		opts = append(opts, otlptracehttp.WithURLPath(u.Path))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Exporter{tp: tp, tracer: tp.Tracer("github.com/voxpipe/voxpipe/pipeline")}, nil
}

// TurnTraced records one turn of session as a span tree.
func (e *Exporter) TurnTraced(session string, tr pipeline.Trace) {
	type mark struct {
		name string
		at   time.Time
	}
	var marks []mark
	for _, name := range pipeline.MarkOrder {
		if at, ok := tr.Marks[name]; ok {
			marks = append(marks, mark{name, at})
		}
	}
	if len(marks) == 0 {
		return
	}
	start, end := marks[0].at, marks[0].at
	for _, m := range marks {
		start, end = minTime(start, m.at), maxTime(end, m.at)
	}
	attrs := []attribute.KeyValue{
		attribute.String("voxpipe.session", session),
		attribute.Int("voxpipe.turn", tr.Turn),
		attribute.Bool("voxpipe.interrupted", tr.Interrupted),
		attribute.Int("voxpipe.prompt_tokens", tr.PromptTokens),
		attribute.Int("voxpipe.cached_tokens", tr.CachedTokens),
	}
	if ms, ok := tr.VoiceToVoice(); ok {
		attrs = append(attrs, attribute.Float64("voxpipe.voice_to_voice_ms", ms))
	}
	for part, d := range tr.TTFT {
		attrs = append(attrs, attribute.Float64("voxpipe.llm."+part+"_ms", ms(d)))
	}
	ctx, turn := e.tracer.Start(context.Background(), "turn", trace.WithTimestamp(start),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindServer))
	for i := 1; i < len(marks); i++ {
		from, to := marks[i-1], marks[i]
		if to.at.Before(from.at) {
			continue // out of order (a client's late playback report)
		}
		_, st := e.tracer.Start(ctx, to.name, trace.WithTimestamp(from.at),
			trace.WithAttributes(attribute.String("voxpipe.from", from.name)))
		st.End(trace.WithTimestamp(to.at))
	}
	turn.End(trace.WithTimestamp(end))
}

// Shutdown sends what is batched and stops the exporter.
func (e *Exporter) Shutdown(ctx context.Context) error { return e.tp.Shutdown(ctx) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
