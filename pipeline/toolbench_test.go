package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/openai"
	"github.com/voxpipe/voxpipe/tools"
)

// paceLLM is a remote model for benchmarks: an OpenAI-compatible server
// that streams at a fixed time to first token and per token. Asked with
// tools and no tool result yet, it calls get_time (callTokens events);
// otherwise it answers with answerTokens.
type paceLLM struct {
	ttft, perToken time.Duration
	callTokens     []string // the call's arguments, one event each
	answerTokens   []string
}

func (p *paceLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answered := false
	for _, m := range req.Messages {
		answered = answered || m.Role == "tool"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		_, _ = fmt.Fprintf(w, `data: {"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, fin)
		fl.Flush()
	}
	time.Sleep(p.ttft)
	if len(req.Tools) > 0 && !answered {
		send(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_time","arguments":""}}]}`, "")
		for _, a := range p.callTokens {
			time.Sleep(p.perToken)
			b, _ := json.Marshal(a)
			send(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(b)+`}}]}`, "")
		}
		send(`{}`, "tool_calls")
	} else {
		for i, tok := range p.answerTokens {
			if i > 0 {
				time.Sleep(p.perToken)
			}
			b, _ := json.Marshal(tok)
			send(`{"content":`+string(b)+`}`, "")
		}
		send(`{}`, "stop")
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// instantTool answers at once, so what the benchmark measures beyond the
// model's time is the tool round's own machinery.
type instantTool struct{}

func (instantTool) Spec() llm.Tool {
	return llm.Tool{Name: "get_time", Description: "the time now", Parameters: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}}}`)}
}

func (instantTool) Call(context.Context, tools.Call) (string, error) { return "12:00", nil }

// BenchmarkToolRoundTrip measures what a tool round adds to heard latency
// with a remote model of fixed pacing (HTTP, SSE, the llm/openai client):
// end of speech (the SpeechEnd frame) to the first answer frame, for the
// same spoken answer without and with a get_time call before it, b.N turns
// of each in the same run. round_ms is the difference of the medians less
// the model's own time for the call round (its time to first token plus a
// token time per argument piece) and the tool's (none): what the round's
// machinery costs (issue goal: ≤ 50 ms).
func BenchmarkToolRoundTrip(b *testing.B) {
	pace := &paceLLM{
		ttft:         40 * time.Millisecond,
		perToken:     10 * time.Millisecond,
		callTokens:   []string{`{"zone":`, `"local"}`},
		answerTokens: strings.SplitAfter("It is twelve o'clock. Anything else?", " "),
	}
	srv := httptest.NewServer(pace)
	defer srv.Close()
	callRound := pace.ttft + time.Duration(len(pace.callTokens))*pace.perToken
	median := func(withTool bool) float64 {
		model, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "pace"})
		if err != nil {
			b.Fatal(err)
		}
		be := Backends{ASR: &fakeASR{transcripts: []string{"what time is it"}, minFrames: 1}, LLM: model, TTS: &toneTTS{rate: 48000, wordMs: 20}}
		if withTool {
			be.Tools = []tools.Provider{tools.Static{instantTool{}}}
		}
		heard := runTurns(b, be, 300*time.Millisecond) // the answer plays out
		return heard[len(heard)/2]
	}
	plain, withTool := median(false), median(true)
	b.ReportMetric(plain, "answer_heard_ms")
	b.ReportMetric(withTool, "tool_heard_ms")
	b.ReportMetric(withTool-plain-float64(callRound)/float64(time.Millisecond), "round_ms")
}

// runTurns plays b.N utterances into a session on be (barge-in off,
// speech and silence faster than real time) and returns the sorted times
// from each utterance's SpeechEnd frame to its first answer frame, in ms.
// Between turns it waits playout, the client playing the answer out. A
// final transcript or answer audio before the SpeechEnd frame fails it:
// the VAD would have ended the utterance early.
func runTurns(b *testing.B, be Backends, playout time.Duration) []float64 {
	b.Helper()
	cfg := testConfig()
	cfg.BargeIn = false
	cfg.MaxHistoryMessages = 4
	sess, err := NewSession("bench", cfg, be, nil, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	in := make(chan Input)
	out := make(chan Output)
	type stamped struct {
		o  Output
		at time.Time
	}
	got := make(chan stamped, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = sess.Run(ctx, in, out) })
	wg.Go(func() { // the transport: reads promptly, stamps each output
		for {
			select {
			case o := <-out:
				got <- stamped{o, time.Now()}
			case <-ctx.Done():
				return
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	n := cfg.InputRate * frameMs / 1000
	speech := utteranceAudio(cfg.InputRate)
	quiet := make([]int16, n)
	endFrames := cfg.VAD.EndSilenceMs / frameMs
	send := func(pcm []int16) { in <- Input{Audio: append([]int16(nil), pcm...)} }
	for range 10 {
		send(quiet)
	}
	heard := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for f := 0; f < 12; f++ {
			send(speech[f*n : (f+1)*n])
		}
		for f := 0; f < endFrames-1; f++ {
			send(quiet)
		}
		for len(got) > 0 { // transcript partials may be there, audio must not
			if st := <-got; st.o.Audio != nil || (st.o.Event != nil && st.o.Event.Type == EventTranscript && st.o.Event.Final) {
				b.Fatalf("turn %d: %s (turn %d) before the SpeechEnd frame: the VAD ended the utterance early", i+1, summarize([]Output{st.o}), st.o.Event.Turn)
			}
		}
		start := time.Now()
		send(quiet) // completes EndSilenceMs: SpeechEnd
		var first time.Time
	wait:
		for {
			select {
			case st := <-got:
				if st.o.Audio != nil && first.IsZero() {
					first = st.at
				}
				if st.o.Event != nil && st.o.Event.Type == EventTrace {
					break wait
				}
			case <-time.After(10 * time.Second):
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
				b.Fatalf("turn %d: no trace event 10 s after speech end", i+1)
			}
		}
		if first.IsZero() {
			b.Fatalf("turn %d: no answer audio", i+1)
		}
		heard = append(heard, float64(first.Sub(start))/float64(time.Millisecond))
		time.Sleep(playout)
	}
	b.StopTimer()
	sort.Float64s(heard)
	return heard
}
