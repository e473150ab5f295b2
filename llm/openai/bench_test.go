package openai

import (
	"context"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
)

// questions is what the benchmark's "person" asks, in turn.
var questions = []string{
	"what is the capital of france", "tell me a joke", "how do birds fly",
	"what time is it", "can you help me cook rice", "what is the weather like",
}

// askASR recognises utterance i as questions[i % len] (the same sequence
// for both sessions of a pair, since each session has its own).
type askASR struct{ n atomic.Int32 }

func (a *askASR) Start(ctx context.Context, rate int) (asr.Stream, error) {
	i := int(a.n.Add(1)-1) % len(questions)
	return sessiontest.ASR{Text: questions[i]}.Start(ctx, rate)
}

// BenchmarkVoiceLoopRemote measures what a remote LLM adds to heard
// latency (first answer audio at the client − the end of the endpointing
// silence): two sessions on the same demo engine, one calling it in
// process, one through llm/openai and voxpipe's own /v1 on loopback, with
// the same questions, alternating which goes first. It reports each side's
// median and the median of the paired differences (remote − in-process).
//
//	go test -run '^$' -bench VoiceLoopRemote -benchtime 30x ./llm/openai
func BenchmarkVoiceLoopRemote(b *testing.B) { benchVoiceLoop(b, demoEngine(b)) }

// BenchmarkVoiceLoopRemoteTransport is the same with a model that takes a
// fixed 4 ms per token instead of the engine, so the engine's variance on
// a loaded machine drops out and the difference is the transport alone
// (HTTP, SSE, JSON, the /v1 handler).
func BenchmarkVoiceLoopRemoteTransport(b *testing.B) {
	benchVoiceLoop(b, pacedLLM{answer: "The capital of France is Paris, a city on the Seine.", perToken: 4 * time.Millisecond})
}

// pacedLLM answers every request with answer, a word per token, one
// token per perToken.
type pacedLLM struct {
	answer   string
	perToken time.Duration
}

func (m pacedLLM) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	out := make(chan llm.Token, 64)
	go func() {
		defer close(out)
		t := time.NewTicker(m.perToken)
		defer t.Stop()
		n := 0
		for _, w := range strings.SplitAfter(m.answer, " ") {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			n++
			out <- llm.Token{Text: w}
		}
		out <- llm.Token{Done: true, Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: n}}
	}()
	return out, nil
}

func benchVoiceLoop(b *testing.B, e llm.Model) {
	remote, err := NewClient(Config{BaseURL: voxpipeV1(b, e), Model: "voxpipe-demo", Retries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer remote.Close()
	cfg := sessiontest.Config()
	cfg.MaxTokens = 24
	start := func(m llm.Model) *sessiontest.Client {
		return sessiontest.Start(b, cfg, pipeline.Backends{ASR: &askASR{}, LLM: m, TTS: sessiontest.TTS{}})
	}
	local, viaV1 := start(e), start(remote)
	// One warm-up turn each: the first pays for page faults and the
	// connection.
	local.Utterance(false)
	viaV1.Utterance(false)
	var inproc, rem, diff []float64
	var ttftNet, ttftServer []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var l, r sessiontest.Turn
		if i%2 == 0 {
			l, r = local.Utterance(false), viaV1.Utterance(false)
		} else {
			r, l = viaV1.Utterance(false), local.Utterance(false)
		}
		if len(l.Errors)+len(r.Errors) > 0 || l.FirstAudio.IsZero() || r.FirstAudio.IsZero() {
			b.Fatalf("turn %d: errors %q / %q", i, l.ErrorText(), r.ErrorText())
		}
		inproc, rem = append(inproc, l.Heard()), append(rem, r.Heard())
		diff = append(diff, r.Heard()-l.Heard())
		if ms := r.Trace.TTFTMs; ms != nil {
			ttftNet, ttftServer = append(ttftNet, ms[pipeline.TTFTNetwork]), append(ttftServer, ms[pipeline.TTFTServer])
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(median(inproc), "inproc_heard_ms")
	b.ReportMetric(median(rem), "remote_heard_ms")
	b.ReportMetric(median(diff), "paired_diff_ms")
	b.ReportMetric(median(ttftNet), "ttft_network_ms")
	b.ReportMetric(median(ttftServer), "ttft_server_ms")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
