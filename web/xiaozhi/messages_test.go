package xiaozhi

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the code")

const goldenSession = "3f0c9a4e-2d7b-4c55-9f61-0a1b2c3d4e5f"

// TestGoldenServerMessages pins every message the server sends, byte for
// byte, to testdata/golden/*.json (reviewed against the reference §4.2,
// §6.2 and §2.3; regenerate with -update and review the diff).
func TestGoldenServerMessages(t *testing.T) {
	offset := 480
	msgs := map[string]any{
		"hello":              helloReply(goldenSession, 1, 24000),
		"hello_v3_16k":       helloReply(goldenSession, 3, 16000),
		"stt":                sttMessage{Type: typeSTT, Text: "what's the weather like", SessionID: goldenSession},
		"llm":                llmMessage{Type: typeLLM, Emotion: "thinking", Text: emotionEmoji["thinking"], SessionID: goldenSession},
		"tts_start":          ttsMessage{Type: typeTTS, State: ttsStart, SessionID: goldenSession},
		"tts_sentence_start": ttsMessage{Type: typeTTS, State: ttsSentenceStart, Text: "It is sunny today.", SessionID: goldenSession},
		"tts_stop":           ttsMessage{Type: typeTTS, State: ttsStop, SessionID: goldenSession},
		"mcp":                mcpMessage{Type: typeMCP, SessionID: goldenSession, Payload: json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}`)},
		"error":              errorMessage{Type: typeError, Code: "bad_message", Message: `xiaozhi: bad message: listen state "dance" (want start, stop or detect)`, SessionID: goldenSession},
		"pong":               pongMessage{Type: typePong, SessionID: goldenSession},
	}
	ota := otaResponse{Firmware: &otaFirmware{Version: "2.4.2"}, WebSocket: otaWebSocket{URL: "ws://192.168.1.10:8080/xiaozhi/v1/", Token: "devtoken-123"}}
	ota.ServerTime.Timestamp, ota.ServerTime.TimezoneOffset = 1767225600000, offset
	msgs["ota_response"] = ota
	for name, m := range msgs {
		got, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", "golden", name+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to create it)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// TestGoldenDeviceMessages parses every device message as the firmware
// (and, for the lenient cases, other clients) writes it:
// testdata/device/*.json.
func TestGoldenDeviceMessages(t *testing.T) {
	want := map[string]func(deviceMessage) bool{
		"hello": func(m deviceMessage) bool {
			return m.Type == typeHello && m.Version == 1 && bool(m.Features.MCP) && m.AudioParams.SampleRate == 16000 && m.AudioParams.FrameDuration == 60
		},
		"hello_old_firmware": func(m deviceMessage) bool {
			return m.Type == typeHello && !bool(m.Features.MCP) && m.AudioParams.Format == "opus"
		},
		"hello_string_numbers": func(m deviceMessage) bool { return m.Version == 3 && m.AudioParams.SampleRate == 16000 },
		"listen_detect":        func(m deviceMessage) bool { return m.State == listenDetect && m.Text == "Hi ESP" },
		"listen_start_auto":    func(m deviceMessage) bool { return m.State == listenStart && listenMode(m.Mode) == modeAuto },
		"listen_start_manual":  func(m deviceMessage) bool { return listenMode(m.Mode) == modeManual },
		"listen_start_rt":      func(m deviceMessage) bool { return listenMode(m.Mode) == modeRealtime },
		"listen_stop":          func(m deviceMessage) bool { return m.State == listenStop },
		"abort":                func(m deviceMessage) bool { return m.Type == typeAbort && m.Reason == "" },
		"abort_wake_word":      func(m deviceMessage) bool { return m.Reason == "wake_word_detected" },
		"mcp_result":           func(m deviceMessage) bool { return m.Type == typeMCP && strings.Contains(string(m.Payload), "tools") },
		"iot_descriptors":      func(m deviceMessage) bool { return m.Type == typeIoT },
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "device", "*.json"))
	if len(files) != len(want) {
		t.Errorf("%d files in testdata/device, %d checks", len(files), len(want))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := parseDeviceMessage(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if check := want[name]; check == nil || !check(m) {
			t.Errorf("%s parsed as %+v", name, m)
		}
	}
}

// TestOTA checks the answer a device gets at boot, with the firmware's
// request (headers, a body with numbers as strings) and odd ones.
func TestOTA(t *testing.T) {
	offset := 480
	newOTA := func(edit func(*Config)) *httptest.Server {
		cfg := DefaultConfig()
		cfg.TimezoneOffsetMinutes = &offset
		if edit != nil {
			edit(&cfg)
		}
		h, err := New(cfg, Host{Rejected: func(string) {}})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		h.Mount(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	body, err := os.ReadFile(filepath.Join("testdata", "ota_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	post := func(url string, body []byte, header map[string]string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("answer is not JSON: %v", err)
		}
		return resp.StatusCode, out
	}
	deviceHeaders := map[string]string{"Device-Id": "24:0a:c4:12:34:56", "Client-Id": "5f1d2c1e-0000-4000-8000-1234567890ab",
		"Activation-Version": "1", "User-Agent": "bread-compact-wifi/2.4.2", "Accept-Language": "en-US"}

	srv := newOTA(func(c *Config) { c.Token = "devtoken-123" })
	before := time.Now().UnixMilli()
	status, out := post(srv.URL+"/xiaozhi/ota/", body, deviceHeaders)
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	if _, ok := out["mqtt"]; ok {
		t.Error("answer has an mqtt object (the device would prefer it over the WebSocket)")
	}
	if _, ok := out["activation"]; ok {
		t.Error("answer has an activation object")
	}
	ws, _ := out["websocket"].(map[string]any)
	host := strings.TrimPrefix(srv.URL, "http://")
	if ws["url"] != "ws://"+host+"/xiaozhi/v1/" || ws["token"] != "devtoken-123" {
		t.Errorf("websocket %v, want url ws://%s/xiaozhi/v1/ and the token", ws, host)
	}
	if _, ok := ws["version"]; ok {
		t.Errorf("websocket.version set for protocol 1: %v", ws)
	}
	st, _ := out["server_time"].(map[string]any)
	if ts, _ := st["timestamp"].(float64); int64(ts) < before || st["timezone_offset"] != float64(480) {
		t.Errorf("server_time %v", st)
	}
	if fw, _ := out["firmware"].(map[string]any); fw["version"] != "2.4.2" || fw["url"] != "" {
		t.Errorf("firmware %v, want the device's own 2.4.2 echoed with no url", fw)
	}

	// A body that does not parse is tolerated; so is a version the
	// firmware's parser could not compare (not echoed).
	status, out = post(srv.URL+"/xiaozhi/ota/", []byte(`{"application":{"version":"v1-beta"},`), deviceHeaders)
	if status != 200 || out["firmware"] != nil || out["websocket"] == nil {
		t.Errorf("broken body: %d %v", status, out)
	}
	status, out = post(srv.URL+"/xiaozhi/ota/", []byte(`{"application":{"version":"v1-beta"}}`), deviceHeaders)
	if status != 200 || out["firmware"] != nil {
		t.Errorf("non-numeric version echoed: %d %v", status, out)
	}
	// The MAC in the body stands in for a missing header.
	status, _ = post(srv.URL+"/xiaozhi/ota/", body, map[string]string{})
	if status != 200 {
		t.Errorf("device id from the body: status %d", status)
	}
	status, out = post(srv.URL+"/xiaozhi/ota/", []byte(`{}`), map[string]string{})
	if status != 400 || !strings.Contains(out["error"].(string), "Device-Id") {
		t.Errorf("no device id: %d %v", status, out)
	}

	// Configured URL and framing version; the allow list.
	srv = newOTA(func(c *Config) {
		c.WebSocketURL, c.ProtocolVersion = "wss://voice.example.org/xiaozhi/v1/", 3
		c.Devices, c.AllowedDevices = DevicesAllowList, []string{"24:0A:C4:12:34:56"}
	})
	status, out = post(srv.URL+"/xiaozhi/ota/", body, deviceHeaders)
	ws, _ = out["websocket"].(map[string]any)
	if status != 200 || ws["url"] != "wss://voice.example.org/xiaozhi/v1/" || ws["version"] != float64(3) || ws["token"] != "" {
		t.Errorf("configured: %d %v", status, out)
	}
	status, out = post(srv.URL+"/xiaozhi/ota/", body, map[string]string{"Device-Id": "11:22:33:44:55:66"})
	if status != 403 || !strings.Contains(out["error"].(string), "allow list") {
		t.Errorf("unknown device: %d %v", status, out)
	}

	// GET is a line for people checking the address in a browser.
	resp, err := http.Get(srv.URL + "/xiaozhi/ota/")
	if err != nil {
		t.Fatal(err)
	}
	line := new(bytes.Buffer)
	_, _ = line.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(line.String(), "wss://voice.example.org/xiaozhi/v1/") {
		t.Errorf("GET: %d %q", resp.StatusCode, line)
	}
	// The activation poll (only if a device polls anyway) succeeds.
	resp, err = http.Post(srv.URL+"/xiaozhi/ota/activate", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("activate: %d", resp.StatusCode)
	}
}

func TestConfigValidation(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"relative path": func(c *Config) { c.OTAPath = "xiaozhi/ota/" },
		"same paths":    func(c *Config) { c.WSPath = c.OTAPath },
		"http url":      func(c *Config) { c.WebSocketURL = "http://x/" },
		"version 4":     func(c *Config) { c.ProtocolVersion = 4 },
		"devices":       func(c *Config) { c.Devices = "some" },
		"rate":          func(c *Config) { c.OutputRate = 48000 },
		"lead":          func(c *Config) { c.TTSStartLead = 2 * time.Second },
		"emotion":       func(c *Config) { c.Emotion = "grumpy" },
		"hello timeout": func(c *Config) { c.HelloTimeout = 0 },
		"mcp timeout":   func(c *Config) { c.MCPTimeout = 0 },
		"mcp list wait": func(c *Config) { c.MCPListWait = -time.Second },
		"vision url":    func(c *Config) { c.VisionURL = "ftp://x/" },
	} {
		cfg := DefaultConfig()
		edit(&cfg)
		if _, err := New(cfg, Host{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(DefaultConfig(), Host{}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
