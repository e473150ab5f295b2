package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// TestConverse runs voxclient's whole turn against a real server (sphinx,
// flite, a canned LLM) with a stereo 22.05 kHz WAV, in both encodings.
func TestConverse(t *testing.T) {
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

	const question = "go forward ten meters"
	const answer = "Moving forward ten meters now."
	dir := t.TempDir()
	wavPath := filepath.Join(dir, "question.wav")
	// A real recording from pocketsphinx-testdata (16 kHz raw PCM16), made
	// into a stereo 22.05 kHz WAV so the client has to downmix and resample.
	raw, err := os.ReadFile("/usr/share/pocketsphinx/test/data/goforward.raw")
	if err != nil {
		t.Skipf("recording missing (requires pocketsphinx-testdata): %v", err)
	}
	speech := make([]int16, len(raw)/2)
	for i := range speech {
		speech[i] = int16(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
	}
	writeStereoWAV(t, wavPath, speech, 16000, 22050)

	for _, encoding := range []string{"pcm16", "opus"} {
		t.Run(encoding, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			srv, err := web.New(web.Config{MaxSessions: 2, MaxFrameBytes: 8192, IdleTimeout: 30 * time.Second,
				Pipeline: pipeline.DefaultConfig()},
				pipeline.Backends{ASR: rec, LLM: cannedModel{answer}, TTS: synth}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer func() {
				_ = srv.Shutdown(context.Background())
				hs.Close()
			}()

			o := options{url: "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws", wav: wavPath,
				out: filepath.Join(dir, encoding+".wav"), json: true, encoding: encoding,
				rate:    map[string]int{"pcm16": 16000, "opus": 48000}[encoding],
				timeout: 60 * time.Second, tail: 1500 * time.Millisecond}
			res, err := converse(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if errs, n := asrtest.WER(asrtest.Words(question), asrtest.Words(res.Transcript)); 2*errs > n {
				t.Errorf("transcript %q: %d errors in %d words", res.Transcript, errs, n)
			}
			if strings.Join(strings.Fields(res.Answer), " ") != answer {
				t.Errorf("answer %q, want %q", res.Answer, answer)
			}
			for _, mark := range []string{pipeline.MarkSpeechEnd, pipeline.MarkASRFinal, pipeline.MarkFirstAudioOut} {
				if _, ok := res.Trace[mark]; !ok {
					t.Errorf("trace lacks %s: %v", mark, res.Trace)
				}
			}
			if res.VoiceToVoiceMs == nil || res.ServerVoiceToVoiceMs == nil {
				t.Errorf("voice-to-voice missing: client %v server %v", res.VoiceToVoiceMs, res.ServerVoiceToVoiceMs)
			}
			f, err := os.Open(o.out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w, err := audio.DecodeWAV(f)
			if err != nil {
				t.Fatal(err)
			}
			if w.SampleRate != o.rate || w.Duration() < 0.5 {
				t.Errorf("answer WAV: %d Hz, %.2f s", w.SampleRate, w.Duration())
			}
			t.Logf("%s: client voice-to-voice %.0f ms, server %.0f ms", encoding, *res.VoiceToVoiceMs, *res.ServerVoiceToVoiceMs)
		})
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"--wav", "x.wav", "--encoding", "mp3"}, {"--nope"}} {
		if err := run(context.Background(), args); !errors.Is(err, errCommandLine) {
			t.Errorf("run(%q): have %v, want a command-line error", args, err)
		}
	}
}

func TestLastSpeechFrame(t *testing.T) {
	pcm := make([]int16, 320*10)
	for i := 320 * 3; i < 320*6; i++ {
		pcm[i] = int16(8000 * (i%2*2 - 1))
	}
	pcm[320*8] = 3 // a click far below the speech: not speech
	if got := lastSpeechFrame(pcm, 320); got != 5 {
		t.Fatalf("have %d, want 5", got)
	}
}

// writeStereoWAV writes pcm resampled to rate as a two-channel WAV with
// 0.3 s of leading silence.
func writeStereoWAV(t *testing.T, path string, pcm []int16, from, rate int) {
	t.Helper()
	r, err := audio.NewResampler(from, rate)
	if err != nil {
		t.Fatal(err)
	}
	mono := append(make([]int16, rate*3/10), r.Process(nil, append(pcm, make([]int16, 160)...))...)
	stereo := make([]int16, 2*len(mono))
	for i, s := range mono {
		stereo[2*i], stereo[2*i+1] = s, s
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := audio.EncodeWAV(f, stereo, rate, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
