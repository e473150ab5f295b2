package xiaozhi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline"
)

// TestDeviceBadInput sends what a broken client might: each gets an error
// message with a specific code, the session stays up, and another device
// on the server is served meanwhile.
func TestDeviceBadInput(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)
	other := dialDevice(t, ts.wsURL(), deviceOpts{deviceID: "aa:bb:cc:dd:ee:ff"})

	pre := dialDevice(t, ts.wsURL(), deviceOpts{noHello: true, version: 3})
	pre.sendRaw(websocket.BinaryMessage, v3Frame([]byte{1, 2, 3}))
	pre.sendJSON(map[string]any{"type": "listen", "state": "start"})
	pre.waitFor("not_started for audio before hello", 0, 5*time.Second, errorWith(pipeline.CodeNotStarted, "audio before hello"))
	pre.waitFor("not_started for listen before hello", 0, 5*time.Second, errorWith(pipeline.CodeNotStarted, "listen before hello"))

	d := dialDevice(t, ts.wsURL(), deviceOpts{version: 3})
	cases := []struct {
		name string
		typ  int
		data []byte
		code string
		says string
	}{
		{"not json", websocket.TextMessage, []byte("hello?"), pipeline.CodeBadMessage, "not a JSON object"},
		{"no type", websocket.TextMessage, []byte(`{"state":"start"}`), pipeline.CodeBadMessage, `without "type"`},
		{"listen state", websocket.TextMessage, []byte(`{"type":"listen","state":"dance"}`), pipeline.CodeBadMessage, "listen state"},
		{"mcp without payload", websocket.TextMessage, []byte(`{"type":"mcp"}`), pipeline.CodeBadMessage, "JSON-RPC"},
		{"short v3 header", websocket.BinaryMessage, []byte{0, 0}, pipeline.CodeBadAudio, "4-byte v3 header"},
		{"v3 size past the end", websocket.BinaryMessage, []byte{0, 0, 0, 9, 1}, pipeline.CodeBadAudio, "payload_size 9"},
		{"v3 json type", websocket.BinaryMessage, []byte{1, 0, 0, 1, 1}, pipeline.CodeBadAudio, "payload type 1"},
	}
	d.sendJSON(map[string]any{"type": "listen", "state": "start", "mode": "auto"})
	for _, tc := range cases {
		n := len(d.snapshot())
		d.sendRaw(tc.typ, tc.data)
		i := d.waitFor(tc.name, n, 5*time.Second, isMsg(typeError, ""))
		var e errorMessage
		_ = json.Unmarshal(d.snapshot()[i].raw, &e)
		if e.Code != tc.code || !strings.Contains(e.Message, tc.says) || e.SessionID != d.hello.SessionID {
			t.Errorf("%s: error %+v, want code %s saying %q", tc.name, e, tc.code, tc.says)
		}
	}
	// Undecodable Opus in a good frame.
	n := len(d.snapshot())
	d.sendRaw(websocket.BinaryMessage, v3Frame([]byte{0xff, 0xff, 0xff, 0xff, 0xff}))
	d.waitFor("bad_audio for garbage opus", n, 5*time.Second, errorWith(pipeline.CodeBadAudio, "undecodable opus"))
	// Unknown types and legacy iot are ignored, not errors; ping gets pong.
	n = len(d.snapshot())
	d.sendJSON(map[string]any{"type": "iot", "update": true, "descriptors": []any{}})
	d.sendJSON(map[string]any{"type": "something_new"})
	d.sendJSON(map[string]any{"type": "ping"})
	d.waitFor("pong", n, 5*time.Second, isMsg(typePong, ""))
	if d.has(n, isMsg(typeError, "")) {
		t.Errorf("error for an unknown or legacy type: %s", d.summary())
	}
	if ts.rejectedCount(pipeline.CodeBadAudio) < 4 || ts.rejectedCount(pipeline.CodeBadMessage) < 4 {
		t.Errorf("rejections not counted: bad_audio %d, bad_message %d", ts.rejectedCount(pipeline.CodeBadAudio), ts.rejectedCount(pipeline.CodeBadMessage))
	}
	// The other device is served all along: a full turn.
	from := speakTurn(t, ts, other, modeAuto, false)
	other.waitFor("the other device's tts stop", from, 30*time.Second, isMsg(typeTTS, ttsStop))
}

func errorWith(code, says string) func(devMsg) bool {
	return func(m devMsg) bool {
		if m.typ != typeError {
			return false
		}
		var e errorMessage
		_ = json.Unmarshal(m.raw, &e)
		return e.Code == code && strings.Contains(e.Message, says)
	}
}

// TestDeviceSilentAfterUpgrade: a client that never sends its hello is
// told so and closed after hello_timeout.
func TestDeviceSilentAfterUpgrade(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config, _ *pipeline.Config) { c.HelloTimeout = 300 * time.Millisecond })
	d := dialDevice(t, ts.wsURL(), deviceOpts{noHello: true})
	d.waitFor("error about the missing hello", 0, 5*time.Second, errorWith(pipeline.CodeNotStarted, "no hello"))
	select {
	case <-d.readDone:
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open after the hello timeout")
	}
	ts.waitIdle(t)
}

// TestFakeDeviceGivesUpWithoutHelloReply checks the fake device itself
// against a server that upgrades but never answers the hello: like the
// firmware, it waits its timeout and closes the connection.
func TestFakeDeviceGivesUpWithoutHelloReply(t *testing.T) {
	closed := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				closed <- err
				return
			}
		}
	}))
	defer srv.Close()
	start := time.Now()
	_, err := tryDialDevice(t, "ws"+strings.TrimPrefix(srv.URL, "http"), deviceOpts{helloTimeout: 300 * time.Millisecond})
	if !errors.Is(err, errNoHelloReply) {
		t.Fatalf("dial: %v, want errNoHelloReply", err)
	}
	select {
	case err := <-closed:
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("server saw %v, want the device's close", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the device did not close the connection")
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("gave up after %v, before its timeout", el)
	}
}

// TestWebSocketRefusals: the handshake is refused, with a reason, without
// a device id, with a wrong token, for a device off the allow list and for
// an unknown framing version.
func TestWebSocketRefusals(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config, _ *pipeline.Config) {
		c.Token, c.Devices, c.AllowedDevices = "s3cret", DevicesAllowList, []string{"24:0A:C4:12:34:56"}
	})
	for _, tc := range []struct {
		name   string
		header http.Header
		query  string
		status int
		says   string
	}{
		{"no device id", http.Header{"Authorization": {"Bearer s3cret"}}, "", 400, "Device-Id"},
		{"device id too long", http.Header{"Device-Id": {strings.Repeat("a", pipeline.MaxDeviceIDBytes+1)}, "Authorization": {"Bearer s3cret"}}, "", 400, "at most"},
		{"no token", http.Header{"Device-Id": {"24:0a:c4:12:34:56"}}, "", 401, "Authorization"},
		{"wrong token", http.Header{"Device-Id": {"24:0a:c4:12:34:56"}, "Authorization": {"Bearer nope"}}, "", 401, "Authorization"},
		{"not allowed", http.Header{"Device-Id": {"11:22:33:44:55:66"}, "Authorization": {"Bearer s3cret"}}, "", 403, "allow list"},
		{"bad version", http.Header{"Device-Id": {"24:0a:c4:12:34:56"}, "Authorization": {"Bearer s3cret"}, "Protocol-Version": {"7"}}, "", 400, "Protocol-Version"},
		{"query parameters", nil, "?device-id=24:0a:c4:12:34:56&authorization=Bearer%20s3cret", 101, ""},
		{"headers", http.Header{"Device-Id": {"24:0a:c4:12:34:56"}, "Authorization": {"Bearer s3cret"}, "Protocol-Version": {"2"}}, "", 101, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, resp, err := websocket.DefaultDialer.Dial(ts.wsURL()+tc.query, tc.header)
			if resp == nil {
				t.Fatalf("no response: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if ws != nil {
				_ = ws.Close()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), tc.says) {
				t.Errorf("body %q, want it to say %q", body, tc.says)
			}
		})
	}
	ts.waitIdle(t)
}

// TestDeviceIdleClose: a device left listening to silence is closed after
// idle_timeout (audio alone is not activity).
func TestDeviceIdleClose(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config, _ *pipeline.Config) { c.IdleTimeout = time.Second })
	d := dialDevice(t, ts.wsURL(), deviceOpts{})
	// Before the send: the server may take the listen start (and start its
	// idle clock) before this goroutine runs again.
	start := time.Now()
	d.sendJSON(map[string]any{"type": "listen", "state": "start", "mode": "auto"})
	go d.streamUntil(func() bool {
		select {
		case <-d.readDone:
			return true
		default:
			return false
		}
	}, 10*time.Second)
	select {
	case <-d.readDone:
	case <-time.After(8 * time.Second):
		t.Fatal("a device listening to silence was not closed")
	}
	if el := time.Since(start); el < time.Second {
		t.Errorf("closed after %v, before the 1 s idle timeout", el)
	}
	ts.waitIdle(t)
}
