package volc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/internal/volcproto"
)

// fakeSauc is a big-model streaming ASR server (doc 3.1, "what the fake
// sauc server should do"): it upgrades only with the auth headers, parses
// frames by flag bits, gunzips, answers the full client request with an
// empty result, reveals the script's words as audio accumulates (one word
// per 100 ms, only when the text changes, as bigmodel_async does), and on
// the last packet sends the final with flags 0b0011 and a negative
// sequence. fault selects a misbehaviour.
type fakeSauc struct {
	t     *testing.T
	srv   *httptest.Server
	words []string
	fault string // "", "error", "text", "drop", "stall", "badfirst", "nofinal"

	mu      sync.Mutex
	seqs    []int32 // sequence numbers received, in order
	request map[string]any
	audio   int // bytes of PCM received
	lastSeq bool
}

func newFakeSauc(t *testing.T, fault string) *fakeSauc {
	f := &fakeSauc{t: t, words: []string{"what", "is", "the", "weather"}, fault: fault}
	up := websocket.Upgrader{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-App-Key") != "app-1" || r.Header.Get("X-Api-Access-Key") != "tok-secret" || r.Header.Get("X-Api-Resource-Id") == "" {
			w.Header().Set("X-Tt-Logid", "fake-log-401")
			http.Error(w, "requested grant not found", http.StatusUnauthorized)
			return
		}
		h := http.Header{"X-Tt-Logid": {"fake-log-1"}, "X-Api-Connect-Id": {r.Header.Get("X-Api-Connect-Id")}}
		conn, err := up.Upgrade(w, r, h)
		if err != nil {
			return
		}
		defer conn.Close()
		f.session(conn)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSauc) url() string {
	return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/api/v3/sauc/bigmodel_async"
}

func (f *fakeSauc) send(conn *websocket.Conn, fr volcproto.Frame) {
	b, err := volcproto.Encode(fr)
	if err != nil {
		f.t.Error(err)
		return
	}
	_ = conn.WriteMessage(websocket.BinaryMessage, b)
}

func (f *fakeSauc) result(conn *websocket.Conn, seq int32, last bool, text string) {
	flags := byte(volcproto.FlagSeq)
	if last {
		flags |= volcproto.FlagLast
		seq = -seq
	}
	payload, _ := json.Marshal(map[string]any{
		"audio_info": map[string]any{"duration": f.audio / 32},
		"result": map[string]any{"text": text, "utterances": []any{
			map[string]any{"text": text, "start_time": 0, "end_time": f.audio / 32, "definite": last},
		}},
	})
	f.send(conn, volcproto.Frame{Type: volcproto.TypeFullServer, Flags: flags, Serial: volcproto.SerialJSON, Comp: volcproto.CompGzip, Seq: seq, Payload: payload})
}

func (f *fakeSauc) session(conn *websocket.Conn) {
	first := true
	said := ""
	for {
		kind, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if kind != websocket.BinaryMessage {
			f.t.Errorf("client sent a %d message", kind)
			return
		}
		fr, err := volcproto.Decode(msg)
		if err != nil {
			f.t.Errorf("client frame: %v", err)
			return
		}
		f.mu.Lock()
		if fr.Flags&volcproto.FlagSeq != 0 {
			f.seqs = append(f.seqs, fr.Seq)
		}
		f.mu.Unlock()
		if first {
			first = false
			if fr.Type != volcproto.TypeFullClient || f.fault == "badfirst" {
				f.send(conn, volcproto.Frame{Type: volcproto.TypeError, Serial: volcproto.SerialJSON, Code: 45000001, Payload: []byte(`{"error":"first frame must be a full client request"}`)})
				return
			}
			var req map[string]any
			if err := json.Unmarshal(fr.Payload, &req); err != nil || fr.Serial != volcproto.SerialJSON || fr.Comp != volcproto.CompGzip {
				f.t.Errorf("full client request: %v (serial %d comp %d)", err, fr.Serial, fr.Comp)
				return
			}
			f.mu.Lock()
			f.request = req
			f.mu.Unlock()
			f.result(conn, 1, false, "")
			continue
		}
		if fr.Type != volcproto.TypeAudioClient {
			f.t.Errorf("frame type %d after the request", fr.Type)
			return
		}
		f.mu.Lock()
		f.audio += len(fr.Payload)
		audio := f.audio
		f.lastSeq = fr.Last()
		f.mu.Unlock()
		n := min(len(f.words), audio/6400) // a word per 200 ms
		text := strings.Join(f.words[:n], " ")
		seq := fr.Seq
		if seq < 0 {
			seq = -seq
		}
		if n >= 2 && f.fault != "nofinal" {
			switch f.fault {
			case "error":
				f.send(conn, volcproto.Frame{Type: volcproto.TypeError, Serial: volcproto.SerialJSON, Code: 55000031, Payload: []byte(`{"error":"server busy"}`)})
				return
			case "text":
				_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"error":"quota exceeded for types: concurrency"}`))
				return
			case "drop":
				return // the connection closes without a final
			case "stall":
				for {
					if _, _, err := conn.ReadMessage(); err != nil {
						return
					}
				}
			}
		}
		if fr.Last() {
			if f.fault == "nofinal" {
				return
			}
			f.result(conn, seq, true, text+".")
			time.Sleep(50 * time.Millisecond) // the client closes first
			return
		}
		if text != said {
			said = text
			f.result(conn, seq, false, text)
		}
	}
}

func (f *fakeSauc) state() (seqs []int32, req map[string]any, audio int, last bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int32(nil), f.seqs...), f.request, f.audio, f.lastSeq
}
