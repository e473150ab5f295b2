package openai

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/ttstest"
)

// fakeSpeech is an OpenAI speech endpoint: it streams 80 ms of a ramp per
// word as raw PCM (or a WAV) in small flushed writes of odd sizes.
func fakeSpeech(t *testing.T, fault string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model, Input, Voice string
			Format              string `json:"response_format"`
		}
		if r.URL.Path != "/v1/audio/speech" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Voice != "af_heart" || req.Format != "pcm" {
			http.Error(w, `{"error":{"message":"bad request"}}`, 400)
			return
		}
		if fault == "500" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":{"message":"model loading"}}`)
			return
		}
		n := len(strings.Fields(req.Input)) * 24000 * 80 / 1000
		pcm := make([]byte, 0, 2*n+44)
		if fault == "wav" {
			w.Header().Set("Content-Type", "audio/wav")
			pcm = append(pcm, "RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\xc0\x5d\x00\x00\x80\xbb\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"...)
		} else {
			w.Header().Set("Content-Type", "audio/pcm")
		}
		for i := range n {
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(i%300*50)))
		}
		fl := w.(http.Flusher)
		for off, k := 0, 0; off < len(pcm); k++ {
			if k == 3 {
				switch fault {
				case "drop":
					panic(http.ErrAbortHandler)
				case "stall":
					<-r.Context().Done()
					return
				}
			}
			end := min(off+1001, len(pcm))
			w.Write(pcm[off:end])
			fl.Flush()
			off = end
			time.Sleep(time.Millisecond)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func synth(t *testing.T, base string) *Synthesizer {
	s, err := New(Config{BaseURL: base, Model: "kokoro", Voice: "af_heart", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHappyPath(t *testing.T) {
	for _, mode := range []string{"", "wav"} {
		r := ttstest.Synthesize(context.Background(), synth(t, fakeSpeech(t, mode)), "Hello there, friend.")
		want := 3 * 24000 * 80 / 1000
		if r.Err != nil || r.Samples != want || len(r.Chunks) < 4 {
			t.Fatalf("%q: %d samples in %d chunks, %v", mode, r.Samples, len(r.Chunks), r.Err)
		}
		i := 0
		for _, c := range r.Chunks {
			for _, v := range c.PCM {
				if v != int16(i%300*50) {
					t.Fatalf("%q: sample %d = %d", mode, i, v)
				}
				i++
			}
		}
		if w := r.Chunks[len(r.Chunks)-1].Words; len(w) != 1 || w[0].EndSample != want {
			t.Fatalf("marks %+v", w)
		}
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{"500", "HTTP 503: model loading"},
		{"drop", "connection lost mid-audio"},
		{"stall", "no audio for 300ms"},
	} {
		r := ttstest.Synthesize(context.Background(), synth(t, fakeSpeech(t, tc.fault)), "Hello there, friend.")
		if r.Err == nil || !strings.HasPrefix(r.Err.Error(), "openai tts: 127.0.0.1:") || !strings.Contains(r.Err.Error(), tc.want) {
			t.Fatalf("%s: %v", tc.fault, r.Err)
		}
	}
}

func TestContract(t *testing.T) {
	base := fakeSpeech(t, "")
	ttstest.Contract(t, func(t *testing.T) tts.Synthesizer { return synth(t, base) })
}

func TestPipelineFaultEndsOnlyTheTurn(t *testing.T) {
	s := synth(t, fakeSpeech(t, "drop"))
	c := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: sessiontest.ASR{Text: "hello"}, LLM: sessiontest.LLM{Answer: "Hi there. How are you today?"}, TTS: s})
	tr := c.Utterance(false)
	if !strings.Contains(tr.ErrorText(), "backend_error: tts: openai tts: ") || tr.Trace == nil {
		t.Fatalf("faulty turn: %q", tr.ErrorText())
	}
	s.endpoint = synth(t, fakeSpeech(t, "")).endpoint
	tr = c.Utterance(false)
	if len(tr.Errors) != 0 || tr.AudioMs < 400 {
		t.Fatalf("next turn: %+v", tr)
	}
}
