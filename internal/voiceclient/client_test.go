package voiceclient

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
	"github.com/voxpipe/voxpipe/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

const (
	question = "go forward ten meters"
	reply    = "Moving forward ten meters now."
)

// server runs a real voxpipe server (pocketsphinx, flite, a canned LLM).
func server(t *testing.T) string {
	t.Helper()
	rec, err := asrsphinx.New(asrsphinx.DefaultConfig())
	if err != nil {
		t.Skipf("pocketsphinx unavailable (requires cgo and pocketsphinx-en-us): %v", err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	synth, err := ttsflite.New(ttsflite.DefaultConfig())
	if err != nil {
		t.Skipf("flite unavailable (requires cgo and flite1-dev): %v", err)
	}
	t.Cleanup(func() { _ = synth.Close() })
	// No barge-in: on a loaded machine an answer may still play when the
	// next question comes.
	pcfg := pipeline.DefaultConfig()
	pcfg.BargeIn = false
	srv, err := web.New(web.Config{MaxSessions: 2, MaxFrameBytes: 8192, IdleTimeout: 30 * time.Second,
		Pipeline: pcfg},
		pipeline.Backends{ASR: rec, LLM: cannedModel{reply}, TTS: synth}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		hs.Close()
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
}

// recording is pocketsphinx-testdata's goforward.raw (16 kHz PCM16) with
// 0.3 s of silence in front.
func recording(t *testing.T) []int16 {
	t.Helper()
	raw, err := os.ReadFile("/usr/share/pocketsphinx/test/data/goforward.raw")
	if err != nil {
		t.Skipf("recording missing (requires pocketsphinx-testdata): %v", err)
	}
	speech := make([]int16, 16000*3/10, 16000*3/10+len(raw)/2)
	for i := 0; i+1 < len(raw); i += 2 {
		speech = append(speech, int16(uint16(raw[i])|uint16(raw[i+1])<<8))
	}
	return speech
}

func resample(t *testing.T, pcm []int16, from, to int) []int16 {
	t.Helper()
	if from == to {
		return pcm
	}
	r, err := audio.NewResampler(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return r.Process(nil, append(pcm, make([]int16, from/100)...))
}

func checkTurn(t *testing.T, tr Turn) {
	t.Helper()
	if errs, n := asrtest.WER(asrtest.Words(question), asrtest.Words(tr.Transcript)); 2*errs > n {
		t.Errorf("turn %d: transcript %q: %d errors in %d words", tr.Turn, tr.Transcript, errs, n)
	}
	if strings.Join(strings.Fields(tr.Answer), " ") != reply {
		t.Errorf("turn %d: answer %q, want %q", tr.Turn, tr.Answer, reply)
	}
	for _, mark := range []string{pipeline.MarkSpeechEnd, pipeline.MarkASRFinal, pipeline.MarkFirstAudioOut, pipeline.MarkFirstAudibleOut} {
		if _, ok := tr.Trace[mark]; !ok {
			t.Errorf("turn %d: trace lacks %s: %v", tr.Turn, mark, tr.Trace)
		}
	}
	if tr.VoiceToVoiceMs == nil || tr.HeardMs == nil || tr.ServerVoiceToVoiceMs == nil || tr.ServerHeardMs == nil {
		t.Fatalf("turn %d: latencies missing: client %v %v, server %v %v", tr.Turn, tr.VoiceToVoiceMs, tr.HeardMs, tr.ServerVoiceToVoiceMs, tr.ServerHeardMs)
	}
	// Heard is never before the first frame; the endpointing wait alone
	// is hundreds of ms.
	if *tr.HeardMs < *tr.VoiceToVoiceMs || *tr.VoiceToVoiceMs < 100 {
		t.Errorf("turn %d: heard %.0f ms, voice-to-voice %.0f ms", tr.Turn, *tr.HeardMs, *tr.VoiceToVoiceMs)
	}
	if len(tr.Audio) == 0 || tr.AnswerAudioMs < 500 {
		t.Errorf("turn %d: %d samples of answer (%.0f ms)", tr.Turn, len(tr.Audio), tr.AnswerAudioMs)
	}
	t.Logf("turn %d: heard %.0f ms (server %.0f), voice-to-voice %.0f ms (server %.0f)",
		tr.Turn, *tr.HeardMs, *tr.ServerHeardMs, *tr.VoiceToVoiceMs, *tr.ServerVoiceToVoiceMs)
}

// TestRunEveryTurn streams a file with the question twice and gets both
// turns back, each with its own latencies.
func TestRunEveryTurn(t *testing.T) {
	url := server(t)
	q := recording(t)
	speech := append(append(append([]int16(nil), q...), make([]int16, 16000*5/2)...), q...)
	res, err := Run(context.Background(), Config{URL: url, KeepAudio: true}, speech)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Turns) != 2 {
		for _, tr := range res.Turns {
			t.Logf("turn %d: %q, trace %v", tr.Turn, tr.Transcript, tr.Trace)
		}
		t.Fatalf("%d turns, want 2", len(res.Turns))
	}
	for _, tr := range res.Turns {
		checkTurn(t, tr)
	}
}

// TestRunFirstTurnOpus stops after one turn, over Opus at 48 kHz.
func TestRunFirstTurnOpus(t *testing.T) {
	url := server(t)
	speech := resample(t, recording(t), 16000, 48000)
	speech = append(speech, speech...) // a second question it must not wait for
	res, err := Run(context.Background(), Config{URL: url, Encoding: "opus", Turns: 1, KeepAudio: true}, speech)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Turns) != 1 {
		t.Fatalf("%d turns, want 1", len(res.Turns))
	}
	checkTurn(t, res.Turns[0])
}

func TestRunCancel(t *testing.T) {
	url := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, Config{URL: url}, make([]int16, 16000*5)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want the context's error", err)
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Encoding: "mp3"}, {Rate: 44101}} {
		if _, err := Run(context.Background(), cfg, nil); err == nil {
			t.Errorf("Run(%+v) succeeded", cfg)
		}
	}
}
