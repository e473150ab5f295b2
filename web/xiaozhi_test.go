package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

// TestXiaozhiMounted serves a device beside /ws: the OTA answer points at
// the mounted WebSocket, the hello is answered, device sessions share
// MaxSessions with the WebSocket ones (a full server refuses the device),
// and with API keys set a device gets in on the device token the OTA
// answer handed it (devices cannot send keys), not on nothing.
func TestXiaozhiMounted(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) {
		xc := xiaozhi.DefaultConfig()
		xc.Token = "device-token"
		c.Xiaozhi = &xc
		c.MaxSessions = 1
		c.Access.Keys = []string{"api-key"}
	})
	resp, err := http.Post(ts.http.URL+"/xiaozhi/ota/", "application/json", strings.NewReader(`{"mac_address":"24:0a:c4:12:34:56"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ota struct {
		WebSocket struct{ URL, Token string } `json:"websocket"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ota)
	_ = resp.Body.Close()
	want := "ws" + strings.TrimPrefix(ts.http.URL, "http") + "/xiaozhi/v1/"
	if resp.StatusCode != 200 || ota.WebSocket.URL != want {
		t.Fatalf("OTA: %d, websocket url %q, want %q", resp.StatusCode, ota.WebSocket.URL, want)
	}
	h := http.Header{"Device-Id": {"24:0a:c4:12:34:56"}, "Protocol-Version": {"1"}}
	if _, resp, err := websocket.DefaultDialer.Dial(ota.WebSocket.URL, h); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("device without its token on a keyed server: %v", err)
	}
	h.Set("Authorization", "Bearer "+ota.WebSocket.Token)
	dev, resp, err := websocket.DefaultDialer.Dial(ota.WebSocket.URL, h)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	sendJSON(t, dev, map[string]any{"type": "hello", "version": 1, "transport": "websocket",
		"audio_params": map[string]any{"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60}})
	_ = dev.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := dev.ReadMessage()
	if err != nil || !strings.Contains(string(data), `"type":"hello"`) || !strings.Contains(string(data), `"transport":"websocket"`) {
		t.Fatalf("hello reply %s, %v", data, err)
	}
	if n := ts.srv.ActiveSessions(); n != 1 {
		t.Errorf("%d active sessions, want the device's 1", n)
	}
	// /ws needs the key; with it, the only slot is the device's: refused,
	// and so is a second device.
	if _, resp, err := websocket.DefaultDialer.Dial(ts.url, nil); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/ws without an API key: %v", err)
	}
	if _, resp, err := websocket.DefaultDialer.Dial(ts.url, http.Header{"Authorization": {"Bearer api-key"}}); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ws beside a device on a 1-session server: %v", err)
	}
	if _, resp, err := websocket.DefaultDialer.Dial(ota.WebSocket.URL, h); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second device on a 1-session server: %v", err)
	}
	_ = dev.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = dev.Close()
	waitIdle(t, ts.srv)
}

// TestXiaozhiSessionRate: device WebSockets are held to the per-IP
// session rate: the second connection within the minute is
// refused with 429, as a /ws session would be.
func TestXiaozhiSessionRate(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) {
		xc := xiaozhi.DefaultConfig()
		c.Xiaozhi = &xc
		c.Access.SessionsPerMinute = 1
	})
	url := "ws" + strings.TrimPrefix(ts.http.URL, "http") + "/xiaozhi/v1/"
	h := http.Header{"Device-Id": {"24:0a:c4:12:34:56"}, "Protocol-Version": {"1"}}
	dev, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	_, resp, err = websocket.DefaultDialer.Dial(url, h)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second device connection within the minute: %v (want 429 with Retry-After)", err)
	}
	if resp != nil {
		_ = resp.Body.Close()
	}
	// The OTA check is no session: it is never rate limited.
	for range 3 {
		r, err := http.Post(ts.http.URL+"/xiaozhi/ota/", "application/json", strings.NewReader(`{"mac_address":"24:0a:c4:12:34:56"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Errorf("OTA: %d, want 200", r.StatusCode)
		}
	}
	_ = dev.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = dev.Close()
	waitIdle(t, ts.srv)
}
