package openai

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/pipeline"
)

// fakeWhisper is an OpenAI transcription endpoint: multipart form with a
// WAV "file" and a "model"; it answers {"text": ...} saying how long the
// audio was, or fails as fault says.
func fakeWhisper(t *testing.T, fault string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" {
			http.NotFound(w, r)
			return
		}
		if err := r.ParseMultipartForm(8 << 20); err != nil || r.FormValue("model") != "whisper-1" {
			http.Error(w, `{"error":{"message":"bad form"}}`, 400)
			return
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			http.Error(w, `{"error":{"message":"no file"}}`, 400)
			return
		}
		wav, _ := io.ReadAll(f)
		if len(wav) < 44 || string(wav[:4]) != "RIFF" || string(wav[8:16]) != "WAVEfmt " || string(wav[36:40]) != "data" {
			http.Error(w, `{"error":{"message":"not a WAV"}}`, 400)
			return
		}
		rate := binary.LittleEndian.Uint32(wav[24:])
		ms := int(binary.LittleEndian.Uint32(wav[40:])) / 2 * 1000 / int(rate)
		switch fault {
		case "500":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			fmt.Fprint(w, `{"error":{"message":"CUDA out of memory","type":"server_error"}}`)
			return
		case "drop":
			panic(http.ErrAbortHandler)
		case "slow":
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"text":" you said %d milliseconds "}`, ms/100*100)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func rec(t *testing.T, base string) *Recognizer {
	r, err := New(Config{BaseURL: base, Model: "whisper-1", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(t *testing.T, r *Recognizer, ms int) (string, error) {
	st, err := r.Start(context.Background(), 16000)
	if err != nil {
		t.Fatal(err)
	}
	for range ms / 20 {
		if err := st.Write(make([]int16, 320)); err != nil {
			t.Fatal(err)
		}
	}
	err = st.Close()
	final := ""
	for res := range st.Results() {
		if res.Final {
			final = res.Text
		}
	}
	return final, err
}

func TestHappyPath(t *testing.T) {
	text, err := run(t, rec(t, fakeWhisper(t, "")), 1200)
	if err != nil || text != "you said 1200 milliseconds" {
		t.Fatalf("%q, %v", text, err)
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{"500", "HTTP 500: CUDA out of memory"},
		{"drop", "EOF"},
		{"slow", "no answer within 300ms"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			text, err := run(t, rec(t, fakeWhisper(t, tc.fault)), 400)
			if err == nil || !strings.HasPrefix(err.Error(), "openai asr: 127.0.0.1:") || !strings.Contains(err.Error(), tc.want) || text != "" {
				t.Fatalf("%q, %v; want an error with %q", text, err, tc.want)
			}
		})
	}
}

func TestPipelineFaultEndsOnlyTheTurn(t *testing.T) {
	r := rec(t, fakeWhisper(t, "500"))
	c := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: r, LLM: sessiontest.LLM{Answer: "Fine."}, TTS: sessiontest.TTS{}})
	tr := c.Utterance(false)
	if !strings.Contains(tr.ErrorText(), "backend_error: asr: openai asr: ") || tr.Trace != nil {
		t.Fatalf("faulty utterance: %q, trace %v", tr.ErrorText(), tr.Trace)
	}
	good := rec(t, fakeWhisper(t, ""))
	r.endpoint = good.endpoint
	tr = c.Utterance(false)
	if len(tr.Errors) != 0 || !strings.HasPrefix(tr.Transcript, "you said") || tr.Trace == nil || tr.Trace.Marks[pipeline.MarkASRFinal] <= 0 {
		t.Fatalf("next utterance: %+v", tr)
	}
}
