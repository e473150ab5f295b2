package volc

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/internal/volcproto"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/ttstest"
)

// fakeTTS is the v1 streaming TTS server (doc 4.1, "fake behaviour"): it
// checks "Authorization: Bearer; <token>", reads one full client request,
// and answers with type-11 frames of deterministic PCM, 60 ms per word,
// sequence 1..N-1 (flags 0b0001) and -N on the last (flags 0b0011), with an
// odd split of bytes between frames; then it closes. fault picks a
// misbehaviour.
type fakeTTS struct {
	t    *testing.T
	srv  *httptest.Server
	rate int

	mu    sync.Mutex
	fault string // "", "error", "drop", "stall", "text"; read once per session
	reqs  []map[string]any
}

func newFakeTTS(t *testing.T, fault string) *fakeTTS {
	f := &fakeTTS{t: t, fault: fault, rate: 16000}
	up := websocket.Upgrader{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer; tok-secret" {
			w.Header().Set("X-Tt-Logid", "fake-log-401")
			http.Error(w, "requested grant not found", http.StatusUnauthorized)
			return
		}
		conn, err := up.Upgrade(w, r, http.Header{"X-Tt-Logid": {"fake-log-1"}})
		if err != nil {
			return
		}
		defer conn.Close()
		f.session(conn)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeTTS) url() string {
	return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/api/v1/tts/ws_binary"
}

func (f *fakeTTS) send(conn *websocket.Conn, fr volcproto.Frame) error {
	b, _ := volcproto.Encode(fr)
	return conn.WriteMessage(websocket.BinaryMessage, b)
}

// heal makes the fake answer every later session correctly; sessions
// already open keep their fault.
func (f *fakeTTS) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = ""
}

func (f *fakeTTS) session(conn *websocket.Conn) {
	f.mu.Lock()
	fault := f.fault
	f.mu.Unlock()
	_, msg, err := conn.ReadMessage()
	if err != nil {
		return
	}
	fr, err := volcproto.Decode(msg)
	if err != nil || fr.Type != volcproto.TypeFullClient {
		f.send(conn, volcproto.Frame{Type: volcproto.TypeError, Serial: volcproto.SerialJSON, Code: 3001, Payload: []byte(`{"message":"invalid request"}`)})
		return
	}
	var req map[string]any
	_ = json.Unmarshal(fr.Payload, &req)
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	audio, _ := req["audio"].(map[string]any)
	r, _ := req["request"].(map[string]any)
	app, _ := req["app"].(map[string]any)
	if audio["voice_type"] != "BV001_streaming" {
		f.send(conn, volcproto.Frame{Type: volcproto.TypeError, Serial: volcproto.SerialJSON, Code: 3050, Payload: []byte(`{"message":"voice does not exist"}`)})
		return
	}
	if r["operation"] != "submit" || app["appid"] != "app-1" || app["cluster"] != "volcano_tts" || r["reqid"] == "" {
		f.send(conn, volcproto.Frame{Type: volcproto.TypeError, Serial: volcproto.SerialJSON, Code: 3001, Payload: []byte(`{"message":"invalid request"}`)})
		return
	}
	text, _ := r["text"].(string)
	if fault == "error" {
		f.send(conn, volcproto.Frame{Type: volcproto.TypeError, Serial: volcproto.SerialJSON, Code: 3031, Payload: []byte(`{"message":"processing error"}`)})
		return
	}
	if fault == "text" {
		_ = conn.WriteMessage(websocket.TextMessage, []byte("quota exceeded for types: concurrency"))
		return
	}
	// 60 ms of a ramp per word, as little-endian PCM16, after 250 ms of
	// silence and with 400 ms between sentences, as a real service may
	// send (the client trims and caps them).
	words := strings.Fields(text)
	pcm := make([]byte, 2*f.rate*250/1000, 2*f.rate*(len(words)*60+1000)/1000)
	i := 0
	for k, w := range words {
		for range f.rate * 60 / 1000 {
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(i%200*100-10000)))
			i++
		}
		if strings.HasSuffix(w, ".") && k < len(words)-1 {
			pcm = append(pcm, make([]byte, 2*f.rate*400/1000)...)
		}
	}
	const size = 1921 // bytes per frame: odd, so samples split across frames
	frames := (len(pcm) + size - 1) / size
	for k := 1; k <= frames; k++ {
		part := pcm[(k-1)*size : min(k*size, len(pcm))]
		if k == 2 {
			switch fault {
			case "drop":
				return
			case "stall":
				_, _, _ = conn.ReadMessage() // until the client leaves
				return
			}
		}
		fr := volcproto.Frame{Type: volcproto.TypeAudioServer, Flags: volcproto.FlagSeq, Seq: int32(k), Payload: part}
		if k == frames {
			fr.Flags |= volcproto.FlagLast
			fr.Seq = -fr.Seq
		}
		if f.send(conn, fr) != nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	_, _, _ = conn.ReadMessage() // the client's close
}

func synth(t *testing.T, f *fakeTTS) *Synthesizer {
	t.Helper()
	s, err := New(Config{URL: f.url(), AppID: "app-1", Token: "tok-secret", Voice: "BV001_streaming", Rate: 16000, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHappyPath(t *testing.T) {
	f := newFakeTTS(t, "")
	text := "Hello there, how are you?"
	r := ttstest.Synthesize(context.Background(), synth(t, f), text)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// The 250 ms lead-in is trimmed to within one audibility window of the
	// ramp; then come the fake's samples, whatever the frame boundaries.
	var got []int16
	for _, c := range r.Chunks {
		got = append(got, c.PCM...)
	}
	lead := 0
	for lead < len(got) && got[lead] == 0 {
		lead++
	}
	want := 5 * 16000 * 60 / 1000
	if lead > audio.AudibleWindow(16000) || len(got)-lead != want || len(r.Chunks) < 3 {
		t.Fatalf("%d samples (%d silent in front) in %d chunks, want %d of ramp in several", len(got), lead, len(r.Chunks), want)
	}
	for i, v := range got[lead:] {
		if v != int16(i%200*100-10000) {
			t.Fatalf("sample %d = %d", i, v)
		}
	}
	last := r.Chunks[len(r.Chunks)-1]
	if len(last.Words) != 1 || last.Words[0].TextEnd != len(text) || last.Words[0].EndSample != len(got) {
		t.Fatalf("word marks %+v", last.Words)
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{"error", "server error 3031 (processing error, retryable): processing error"},
		{"drop", "connection lost mid-audio"},
		{"stall", "no frame from the server for 300ms"},
		{"text", "server error: quota exceeded"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			r := ttstest.Synthesize(context.Background(), synth(t, newFakeTTS(t, tc.fault)), "Hello there, how are you?")
			if r.Err == nil || !strings.HasPrefix(r.Err.Error(), "volc tts: ") || !strings.Contains(r.Err.Error(), tc.want) || !strings.Contains(r.Err.Error(), "(logid fake-log-1)") {
				t.Fatalf("err %v, want %q", r.Err, tc.want)
			}
		})
	}
}

func TestUnknownVoiceAndBadToken(t *testing.T) {
	f := newFakeTTS(t, "")
	s := synth(t, f)
	s.cfg.Voice = "nobody"
	if r := ttstest.Synthesize(context.Background(), s, "Hi there."); r.Err == nil || !strings.Contains(r.Err.Error(), "3050 (voice does not exist)") {
		t.Fatalf("unknown voice: %v", r.Err)
	}
	s = synth(t, f)
	s.cfg.Token = "wrong-secret"
	r := ttstest.Synthesize(context.Background(), s, "Hi there.")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "HTTP 401") || strings.Contains(r.Err.Error(), "wrong-secret") {
		t.Fatalf("bad token: %v", r.Err)
	}
}

func TestContract(t *testing.T) {
	f := newFakeTTS(t, "")
	ttstest.Contract(t, func(t *testing.T) tts.Synthesizer {
		s := synth(t, f)
		s.cfg.Timeout = 5 * time.Second
		return s
	})
}

func TestPipelineFaultEndsOnlyTheTurn(t *testing.T) {
	for _, fault := range []string{"error", "drop", "stall"} {
		t.Run(fault, func(t *testing.T) {
			bad := newFakeTTS(t, fault)
			s := synth(t, bad)
			c := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: sessiontest.ASR{Text: "hello"}, LLM: sessiontest.LLM{Answer: "Hi there. How are you?"}, TTS: s})
			tr := c.Utterance(false)
			if !strings.Contains(tr.ErrorText(), "backend_error: ") || !strings.Contains(tr.ErrorText(), "volc tts: ") || tr.Trace == nil {
				t.Fatalf("faulty turn: errors %q, trace %v", tr.ErrorText(), tr.Trace)
			}
			// The synthesizer may still be reading its config for the
			// faulty turn's next sentence: heal the service, not the client.
			bad.heal()
			tr = c.Utterance(false)
			if len(tr.Errors) != 0 || tr.AudioMs < 200 || tr.Trace == nil {
				t.Fatalf("next turn: %+v", tr)
			}
		})
	}
}
