package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
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

// TestJSON runs voxclient against a real server (sphinx, flite, a canned
// LLM) with a stereo 22.05 kHz WAV and checks what --json prints: every
// turn, and the first one's fields at the top level. The client's own
// measurements are tested in internal/voiceclient.
func TestJSON(t *testing.T) {
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
	raw, err := os.ReadFile("/usr/share/pocketsphinx/test/data/goforward.raw")
	if err != nil {
		t.Skipf("recording missing (requires pocketsphinx-testdata): %v", err)
	}
	dir := t.TempDir()
	wavPath := filepath.Join(dir, "question.wav")
	speech := make([]int16, len(raw)/2)
	for i := range speech {
		speech[i] = int16(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
	}
	writeStereoWAV(t, wavPath, speech, 16000, 22050)

	xc := xiaozhi.DefaultConfig()
	srv, err := web.New(web.Config{MaxSessions: 2, MaxFrameBytes: 8192, IdleTimeout: 30 * time.Second,
		Pipeline: pipeline.DefaultConfig(), Xiaozhi: &xc},
		pipeline.Backends{ASR: rec, LLM: cannedModel{"Moving forward ten meters now."}, TTS: synth}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() {
		_ = srv.Shutdown(context.Background())
		hs.Close()
	}()
	// The same summary over /ws and as a xiaozhi device.
	for _, tc := range []struct {
		protocol string
		args     []string
		rate     int
	}{
		{"ws", []string{"--url", "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"}, 16000},
		{"xiaozhi", []string{"--protocol", "xiaozhi", "--url", hs.URL + "/xiaozhi/ota/", "--wake-word", "Hi ESP"}, 24000},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			checkJSON(t, dir, wavPath, tc.args, tc.protocol == "ws", tc.rate)
		})
	}
}

func checkJSON(t *testing.T, dir, wavPath string, args []string, wantTrace bool, rate int) {
	outWAV := filepath.Join(dir, "answer.wav")
	var stdout bytes.Buffer
	err := run(context.Background(), append(args, "--wav", wavPath, "--out", outWAV, "--json"), &stdout, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Transcript string   `json:"transcript"`
		HeardMs    *float64 `json:"heard_ms"`
		Turns      []struct {
			Transcript     string             `json:"transcript"`
			Answer         string             `json:"answer"`
			Trace          map[string]float64 `json:"trace"`
			VoiceToVoiceMs *float64           `json:"voice_to_voice_ms"`
			HeardMs        *float64           `json:"heard_ms"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v in %s", err, stdout.String())
	}
	if len(got.Turns) != 1 || got.Turns[0].Transcript == "" || got.Turns[0].Answer == "" || (got.Turns[0].Trace == nil) == wantTrace ||
		got.Turns[0].VoiceToVoiceMs == nil || got.Turns[0].HeardMs == nil {
		t.Fatalf("turns: %s", stdout.String())
	}
	if got.Transcript != got.Turns[0].Transcript || got.HeardMs == nil || *got.HeardMs != *got.Turns[0].HeardMs {
		t.Errorf("top level is not the first turn: %s", stdout.String())
	}
	f, err := os.Open(outWAV)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := audio.DecodeWAV(f)
	if err != nil {
		t.Fatal(err)
	}
	if w.SampleRate != rate || w.Duration() < 0.5 {
		t.Errorf("answer WAV: %d Hz, %.2f s", w.SampleRate, w.Duration())
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"--wav", "x.wav", "--encoding", "mp3"}, {"--nope"}, {"--wav", "x.wav", "--turns", "-1"},
		{"--wav", "x.wav", "--protocol", "mqtt"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); !errors.Is(err, errCommandLine) {
			t.Errorf("run(%q): have %v, want a command-line error", args, err)
		}
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
