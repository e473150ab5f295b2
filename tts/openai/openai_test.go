package openai

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/ttstest"
)

// The fakes' silences: before the speech, and between sentences.
const leadMs, sentencePauseMs = 250, 400

// fakeSpeech is an OpenAI speech endpoint: it streams 80 ms of a ramp per
// word as raw PCM (or a WAV) in small flushed writes of odd sizes, after
// leadMs of silence and with sentencePauseMs between sentences.
func fakeSpeech(t *testing.T, fault string) string {
	var f atomic.Pointer[string]
	f.Store(&fault)
	return serveSpeech(t, &f)
}

// serveSpeech is fakeSpeech whose fault can change while it serves: each
// request reads it once.
func serveSpeech(t *testing.T, faultp *atomic.Pointer[string]) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault := *faultp.Load()
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
		pcm := make([]byte, 0, 2*n+44+2*24000)
		if fault == "wav" {
			w.Header().Set("Content-Type", "audio/wav")
			pcm = append(pcm, "RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\xc0\x5d\x00\x00\x80\xbb\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"...)
		} else {
			w.Header().Set("Content-Type", "audio/pcm")
		}
		// Like a real service: silence before the speech, and a long pause
		// between sentences (the client must trim and cap them).
		pcm = append(pcm, make([]byte, 2*24000*leadMs/1000)...)
		words := strings.Fields(req.Input)
		i := 0
		for k, w := range words {
			for range 24000 * 80 / 1000 {
				pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(i%300*50)))
				i++
			}
			if strings.HasSuffix(w, ".") && k < len(words)-1 {
				pcm = append(pcm, make([]byte, 2*24000*sentencePauseMs/1000)...)
			}
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
		if r.Err != nil || len(r.Chunks) < 4 {
			t.Fatalf("%q: %d samples in %d chunks, %v", mode, r.Samples, len(r.Chunks), r.Err)
		}
		// The lead-in is trimmed to within one audibility window of the
		// ramp; then come exactly the fake's samples.
		var got []int16
		for _, c := range r.Chunks {
			got = append(got, c.PCM...)
		}
		lead := 0
		for lead < len(got) && got[lead] == 0 {
			lead++
		}
		// The ramp's quiet first samples may go with the silence (one window
		// at most): it resumes at sample skip.
		skip := 0
		if lead < len(got) {
			skip = int(got[lead]) / 50
		}
		win := audio.AudibleWindow(24000)
		if lead > win || skip > win || len(got)-lead != want-skip {
			t.Fatalf("%q: %d samples, %d of them silence in front, the ramp from sample %d; want %d of ramp after at most a window", mode, len(got), lead, skip, want)
		}
		for i, v := range got[lead:] {
			if v != int16((i+skip)%300*50) {
				t.Fatalf("%q: sample %d = %d", mode, i, v)
			}
		}
		if w := r.Chunks[len(r.Chunks)-1].Words; len(w) != 1 || w[0].EndSample != len(got) {
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
	var fault atomic.Pointer[string]
	drop, healed := "drop", ""
	fault.Store(&drop)
	s := synth(t, serveSpeech(t, &fault))
	c := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: sessiontest.ASR{Text: "hello"}, LLM: sessiontest.LLM{Answer: "Hi there. How are you today?"}, TTS: s})
	tr := c.Utterance(false)
	if !strings.Contains(tr.ErrorText(), "backend_error: tts: openai tts: ") || tr.Trace == nil {
		t.Fatalf("faulty turn: %q", tr.ErrorText())
	}
	// The synthesizer may still be busy with the faulty turn's next
	// sentence: heal the service, not the client.
	fault.Store(&healed)
	tr = c.Utterance(false)
	if len(tr.Errors) != 0 || tr.AudioMs < 400 {
		t.Fatalf("next turn: %+v", tr)
	}
}
