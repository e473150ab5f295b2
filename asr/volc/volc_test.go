package volc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/pipeline"
)

func recognizer(t *testing.T, f *fakeSauc, log zerolog.Logger) *Recognizer {
	t.Helper()
	r, err := New(Config{URL: f.url(), AppID: "app-1", Token: "tok-secret", Timeout: 500 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// utterance writes ms of audio in 20 ms frames and closes, collecting the
// results.
func utterance(t *testing.T, r asr.Recognizer, ms int) (partials []string, final string, err error) {
	t.Helper()
	st, err := r.Start(context.Background(), 16000)
	if err != nil {
		return nil, "", err
	}
	read := func() {
		for {
			select {
			case res, ok := <-st.Results():
				if !ok {
					return
				}
				if res.Final {
					final = res.Text
				} else {
					partials = append(partials, res.Text)
				}
			default:
				return
			}
		}
	}
	frame := make([]int16, 320)
	for i := 0; i < ms/20; i++ {
		if err = st.Write(frame); err != nil {
			break
		}
		time.Sleep(2 * time.Millisecond) // let results come while writing
		read()
	}
	cerr := st.Close()
	if err == nil {
		err = cerr
	}
	for res := range st.Results() {
		if res.Final {
			final = res.Text
		} else {
			partials = append(partials, res.Text)
		}
	}
	return partials, final, err
}

func TestHappyPath(t *testing.T) {
	f := newFakeSauc(t, "")
	partials, final, err := utterance(t, recognizer(t, f, zerolog.Nop()), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if final != "what is the weather." {
		t.Fatalf("final %q (partials %q)", final, partials)
	}
	if len(partials) == 0 || partials[0] != "what" {
		t.Fatalf("partials %q", partials)
	}
	seqs, req, audio, last := f.state()
	// One counter over the connection: 1 on the request, 2.. on audio, the
	// last packet negated; 1000 ms in 200 ms packets = 5 packets + the last.
	want := []int32{1, 2, 3, 4, 5, 6, -7}
	if len(seqs) != len(want) {
		t.Fatalf("sequences %v, want %v", seqs, want)
	}
	for i := range want {
		if seqs[i] != want[i] {
			t.Fatalf("sequences %v, want %v", seqs, want)
		}
	}
	if !last || audio != 32000 {
		t.Fatalf("audio %d bytes, last flag %v", audio, last)
	}
	a, _ := req["audio"].(map[string]any)
	r, _ := req["request"].(map[string]any)
	if a["rate"] != float64(16000) || a["format"] != "pcm" || r["model_name"] != "bigmodel" || r["show_utterances"] != true {
		t.Fatalf("request %v", req)
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{"error", "server error 55000031 (server busy)"},
		{"text", "quota exceeded"},
		{"drop", "connection lost before the final result"},
		{"stall", "no final result 500ms after the last packet"},
		{"badfirst", "45000001"},
		{"nofinal", "connection lost before the final result"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			f := newFakeSauc(t, tc.fault)
			_, final, err := utterance(t, recognizer(t, f, zerolog.Nop()), 1000)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "volc asr: ") {
				t.Fatalf("err %v, want one naming volc asr and %q", err, tc.want)
			}
			if final != "" {
				t.Fatalf("a failed utterance gave the final %q", final)
			}
			if !strings.Contains(err.Error(), "(logid fake-log-1)") {
				t.Fatalf("err %v does not carry the connection's logid", err)
			}
		})
	}
}

func TestBadCredentialsRefusedAtHandshake(t *testing.T) {
	f := newFakeSauc(t, "")
	var logs bytes.Buffer
	r, _ := New(Config{URL: f.url(), AppID: "app-1", Token: "wrong-secret-token", Timeout: time.Second, Log: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	_, _, err := utterance(t, r, 200)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401 requested grant not found") || !strings.Contains(err.Error(), "fake-log-401") {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(err.Error()+logs.String(), "wrong-secret-token") {
		t.Fatal("the token appears in an error or a log line")
	}
}

func TestCancelEndsStreamWithoutFinal(t *testing.T) {
	f := newFakeSauc(t, "stall")
	r := recognizer(t, f, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	st, err := r.Start(ctx, 16000)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_ = st.Write(make([]int16, 320))
	}
	cancel()
	select {
	case _, ok := <-st.Results():
		for ok {
			_, ok = <-st.Results()
		}
	case <-time.After(time.Second):
		t.Fatal("Results not closed 1 s after cancel")
	}
	_ = st.Close()
}

func TestSampleRate(t *testing.T) {
	r, _ := New(Config{AppID: "a", Token: "t"})
	if _, err := r.Start(context.Background(), 8000); !errors.Is(err, asr.ErrSampleRate) {
		t.Fatalf("8 kHz: %v", err)
	}
}

func TestMissingCredentialsNameTheVariable(t *testing.T) {
	if _, err := New(Config{AppID: "a"}); err == nil || !strings.Contains(err.Error(), TokenEnv) {
		t.Fatalf("no token: %v", err)
	}
	if _, err := New(Config{Token: "t"}); err == nil || !strings.Contains(err.Error(), AppIDEnv) {
		t.Fatalf("no app id: %v", err)
	}
}

// TestPipelineFaultEndsOnlyTheTurn runs a session on the fake: a server
// error fails the utterance with an error event naming the backend, and
// the next utterance, on a healthy server, is answered.
func TestPipelineFaultEndsOnlyTheTurn(t *testing.T) {
	for _, fault := range []string{"error", "nofinal", "stall"} {
		t.Run(fault, func(t *testing.T) {
			bad := newFakeSauc(t, fault)
			r := recognizer(t, bad, zerolog.Nop())
			c := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: r, LLM: sessiontest.LLM{Answer: "It is sunny."}, TTS: sessiontest.TTS{}})
			tr := c.Utterance(true)
			if len(tr.Errors) == 0 || !strings.Contains(tr.ErrorText(), "backend_error: asr: ") || !strings.Contains(tr.ErrorText(), "volc asr: ") || tr.Trace != nil {
				t.Fatalf("faulty utterance: errors %q, trace %v", tr.ErrorText(), tr.Trace)
			}
			good := newFakeSauc(t, "")
			r.cfg.URL = good.url() // the same recogniser, the server is back
			tr = c.Utterance(true)
			if len(tr.Errors) != 0 || tr.Transcript != "what is the weather." || !strings.HasPrefix(tr.Answer, "It") || tr.AudioMs < 120 {
				t.Fatalf("next utterance: %+v", tr)
			}
		})
	}
}
