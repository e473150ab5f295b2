package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
	"github.com/voxpipe/voxpipe/web"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

// cannedModel answers every request with the same text, a word per token.
type cannedModel struct{ answer string }

func (m cannedModel) Stream(ctx context.Context, _ llm.Request) (<-chan llm.Token, error) {
	out := make(chan llm.Token)
	go func() {
		defer close(out)
		for _, w := range strings.SplitAfter(m.answer, " ") {
			select {
			case out <- llm.Token{Text: w}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- llm.Token{Done: true, Usage: &llm.Usage{}}:
		case <-ctx.Done():
		}
	}()
	return out, nil
}

// TestLevelAgainstServer runs a level of two devices, two turns each,
// against a real server (sphinx, flite, a canned LLM) that admits one
// session: one device is refused busy, the other's turns are measured. Over
// /ws and as xiaozhi speakers, whose turns and traces the device has to
// piece together from the device protocol and GET /traces.
func TestLevelAgainstServer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rec, err := asrsphinx.New(asrsphinx.DefaultConfig())
	if err != nil {
		t.Skipf("pocketsphinx unavailable (requires cgo and pocketsphinx-en-us): %v", err)
	}
	defer rec.Close()
	synth, err := ttsflite.New(ttsflite.DefaultConfig())
	if err != nil {
		t.Skipf("flite unavailable (requires cgo and flite1-dev): %v", err)
	}
	defer synth.Close()
	qs, err := generateQuestions(context.Background(), "rms", []string{"go forward ten meters", "what is your name"})
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"ws", "xiaozhi"} {
		t.Run(transport, func(t *testing.T) {
			xc := xiaozhi.DefaultConfig()
			xc.Token = "device-token" // handed out by the OTA check
			srv, err := web.New(web.Config{MaxSessions: 1, MaxFrameBytes: 8192, IdleTimeout: 30 * time.Second,
				Pipeline: pipeline.DefaultConfig(), Xiaozhi: &xc},
				pipeline.Backends{ASR: rec, LLM: cannedModel{"Sure, here is a short answer."}, TTS: synth}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer func() {
				_ = srv.Shutdown(context.Background())
				hs.Close()
			}()

			url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
			o, err := parseFlags([]string{"--url", url, "--transport", transport, "--turns", "2", "--pause", "300ms", "--stagger", "200ms"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			dev, err := newDevice(o)
			if err != nil {
				t.Fatal(err)
			}
			murl, _ := metricsURL(url)
			b := &bench{o: o, qs: qs, dev: dev, metricsURL: murl, progress: io.Discard}
			st := b.level(context.Background(), 2)
			if st.Admitted != 1 || st.Busy != 1 {
				t.Errorf("admitted %d, busy %d; want 1 and 1 (max_sessions 1)", st.Admitted, st.Busy)
			}
			if st.Turns != 2 || st.NoAnswer != 0 || st.Errors != 0 {
				t.Fatalf("turns %d (no answer %d, errors %v), want 2 answered", st.Turns, st.NoAnswer, st.ErrorsByCode)
			}
			if st.HeardP50 <= 0 || st.HeardP50 > 10000 || st.V2VP50 <= 0 {
				t.Errorf("heard p50 %v ms, v2v p50 %v ms", st.HeardP50, st.V2VP50)
			}
			if st.Scored != 2 || st.WER > 50 {
				t.Errorf("scored %d, WER %v%% (wrong: %v)", st.Scored, st.WER, st.Wrong)
			}
			if _, ok := st.Stages[pipeline.MarkASRFinal]; !ok {
				t.Errorf("stages %v lack asr_final", st.Stages)
			}
			if st.DroppedFrames != 0 || st.ServerCPU <= 0 {
				t.Errorf("dropped %d, server CPU %v (from /metrics)", st.DroppedFrames, st.ServerCPU)
			}
		})
	}
}
