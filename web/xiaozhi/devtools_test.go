package xiaozhi

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tools"
)

// newToolServer is a test server whose sessions' device tools arrive on
// the returned channel; edit adjusts the config further.
func newToolServer(t testing.TB, edit func(*Config)) (*testServer, <-chan *deviceTools) {
	t.Helper()
	got := make(chan *deviceTools, 4)
	ts := newTestServer(t, nil, func(c *Config, _ *pipeline.Config) {
		c.onDeviceTools = func(d *deviceTools) { got <- d }
		if edit != nil {
			edit(c)
		}
	})
	return ts, got
}

// dialTools connects a device with MCP server f and returns its session's
// device tools, without waiting for the list.
func dialTools(t testing.TB, ts *testServer, got <-chan *deviceTools, f *fakeMCP) (*fakeDevice, *deviceTools) {
	t.Helper()
	d := dialDevice(t, ts.wsURL(), deviceOpts{mcp: f})
	select {
	case dev := <-got:
		return d, dev
	case <-time.After(5 * time.Second):
		t.Fatal("no device tools for a device that announced MCP")
		return nil, nil
	}
}

// waitListed waits until dev's discovery has ended.
func waitListed(t testing.TB, dev *deviceTools, within time.Duration) {
	t.Helper()
	select {
	case <-dev.listed.Done():
	case <-time.After(within):
		t.Fatalf("device tools not listed within %v", within)
	}
}

func toolNames(ts []tools.Tool) []string {
	var names []string
	for _, t := range ts {
		names = append(names, t.Spec().Name)
	}
	return names
}

// runTool makes one call through a tools.Set, as a turn does, by the
// name the model sees.
func runTool(t testing.TB, dev *deviceTools, name, args string) tools.Result {
	t.Helper()
	set := tools.NewSet(tools.Limits{}, dev)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return set.Run(ctx, nil, []llm.ToolCall{{ID: "call_1", Name: name, Arguments: args}})[0]
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestDeviceToolsListed: after the hello the server initializes the
// device's MCP server and lists its tools through every page; the tools
// keep their own names and schemas, the user-only tool stays hidden, the
// camera is left out without a vision endpoint, and adjust_volume joins.
func TestDeviceToolsListed(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, nil)
	f := &fakeMCP{pageBytes: 700, tools: firmwareTools(), volume: 60}
	d, dev := dialTools(t, ts, got, f)
	waitListed(t, dev, 10*time.Second)

	reqs := d.mcpRequests()
	if len(reqs) < 2 || reqs[0].Method != "initialize" || reqs[1].Method != "notifications/initialized" || len(reqs[1].ID) != 0 {
		t.Fatalf("first mcp messages: %+v, want initialize then notifications/initialized", reqs)
	}
	var init struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ClientInfo      struct{ Name string }
	}
	if err := json.Unmarshal(reqs[0].Params, &init); err != nil || init.ProtocolVersion != "2024-11-05" ||
		init.ClientInfo.Name != "voxpipe" || init.Capabilities["vision"] != nil {
		t.Errorf("initialize params %s", reqs[0].Params)
	}
	var cursors []string
	for _, r := range reqs[2:] {
		if r.Method != "tools/list" {
			t.Errorf("unexpected %s during discovery", r.Method)
			continue
		}
		var p struct {
			Cursor        *string `json:"cursor"`
			WithUserTools *bool   `json:"withUserTools"`
		}
		if json.Unmarshal(r.Params, &p) != nil || p.Cursor == nil || p.WithUserTools == nil || *p.WithUserTools {
			t.Errorf("tools/list params %s, want a cursor and withUserTools false", r.Params)
			continue
		}
		cursors = append(cursors, *p.Cursor)
	}
	if len(cursors) < 3 || cursors[0] != "" {
		t.Fatalf("tools/list cursors %q: want the first page and at least two more (pages of 700 bytes)", cursors)
	}
	for i, c := range cursors[1:] {
		if c == "" || c == cursors[i] {
			t.Errorf("cursor %d is %q after %q", i+1, c, cursors[i])
		}
	}

	want := []string{toolDeviceStatus, toolSetVolume, "self.screen.set_brightness", "self.screen.set_theme", toolAdjustVolume}
	if names := toolNames(dev.Tools()); !slices.Equal(names, want) {
		t.Fatalf("tools %q, want %q", names, want)
	}
	for _, ft := range f.tools[:4] {
		i := slices.Index(toolNames(dev.Tools()), ft.name)
		if spec := dev.Tools()[i].Spec(); !jsonEqual(t, spec.Parameters, ft.schema()) {
			t.Errorf("%s schema %s, the device's is %s", ft.name, spec.Parameters, ft.schema())
		}
	}
	set := tools.NewSet(tools.Limits{}, dev)
	var modelNames []string
	for _, s := range set.Specs() {
		modelNames = append(modelNames, s.Name)
		if s.Name == "self_audio_speaker_set_volume" &&
			(!strings.Contains(s.Description, "`self_get_device_status`") || strings.Contains(s.Description, "self.get_device_status")) {
			t.Errorf("set_volume's description names the status tool as the model cannot call it: %q", s.Description)
		}
		if s.Name == toolAdjustVolume && !strings.Contains(s.Description, "+10 for up, -10 for down") {
			t.Errorf("adjust_volume description %q", s.Description)
		}
	}
	if !slices.Contains(modelNames, "self_audio_speaker_set_volume") || !slices.Contains(modelNames, "self_get_device_status") {
		t.Errorf("model names %q", modelNames)
	}
	d.close()
	ts.waitIdle(t)
}

// TestDeviceToolsVision: with a vision endpoint, initialize hands it to
// the device and the camera tool is offered.
func TestDeviceToolsVision(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, func(c *Config) { c.VisionURL, c.VisionToken = "http://192.168.1.10:8000/vision", "tok" })
	d, dev := dialTools(t, ts, got, &fakeMCP{tools: firmwareTools()})
	waitListed(t, dev, 10*time.Second)
	var init struct {
		Capabilities struct {
			Vision map[string]string `json:"vision"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(d.mcpRequests()[0].Params, &init)
	if v := init.Capabilities.Vision; v["url"] != "http://192.168.1.10:8000/vision" || v["token"] != "tok" {
		t.Errorf("initialize capabilities.vision %v", v)
	}
	if !slices.Contains(toolNames(dev.Tools()), toolTakePhoto) {
		t.Errorf("tools %q lack the camera", toolNames(dev.Tools()))
	}
	d.close()
	ts.waitIdle(t)
}

// TestDeviceToolsSetVolume: a set_volume call by the model's name reaches
// the device with its arguments, by the device's own name; arguments
// outside the device's schema never reach it.
func TestDeviceToolsSetVolume(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, nil)
	f := &fakeMCP{tools: firmwareTools(), volume: 60}
	d, dev := dialTools(t, ts, got, f)
	waitListed(t, dev, 10*time.Second)
	from := len(d.mcpRequests())

	r := runTool(t, dev, "self_audio_speaker_set_volume", `{"volume":30}`)
	if r.Outcome != tools.OutcomeOK || r.Content != "true" || r.Tool != toolSetVolume {
		t.Fatalf("set_volume: %+v", r)
	}
	t.Logf("set_volume round trip over the device websocket: %v", r.Duration)
	if calls := f.callsOf(toolSetVolume); len(calls) != 1 || calls[0].args["volume"] != float64(30) || f.getVolume() != 30 {
		t.Errorf("the device got %+v, volume %d", calls, f.getVolume())
	}
	i := d.waitMCP("tools/call", from, time.Second, func(m rpcMessage) bool { return m.Method == "tools/call" })
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	req := d.mcpRequests()[i]
	var id float64
	if json.Unmarshal(req.Params, &p) != nil || p.Name != toolSetVolume || p.Arguments["volume"] != float64(30) || json.Unmarshal(req.ID, &id) != nil {
		t.Errorf("tools/call on the wire: id %s params %s", req.ID, req.Params)
	}

	r = runTool(t, dev, "self_audio_speaker_set_volume", `{"volume":130}`)
	if r.Outcome != tools.OutcomeBadArgs {
		t.Errorf("volume 130: %+v, want bad arguments", r)
	}
	if n := len(f.callsOf(toolSetVolume)); n != 1 {
		t.Errorf("%d set_volume calls reached the device, want 1", n)
	}
	d.close()
	ts.waitIdle(t)
}

// TestAdjustVolume: adjust_volume reads the volume from the device's
// status, adds the step, clamps to 0..100 and sets the result (nothing
// when it would not change).
func TestAdjustVolume(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, nil)
	f := &fakeMCP{tools: firmwareTools()}
	d, dev := dialTools(t, ts, got, f)
	waitListed(t, dev, 10*time.Second)
	for _, c := range []struct {
		from, step, want int
		set              bool
	}{
		{50, 10, 60, true},
		{50, -10, 40, true},
		{95, 10, 100, true},
		{5, -10, 0, true},
		{30, -25, 5, true},
		{100, 10, 100, false},
		{0, -100, 0, false},
		{40, 0, 40, false},
	} {
		f.setVolume(c.from)
		before := len(f.callsOf(toolSetVolume))
		r := runTool(t, dev, toolAdjustVolume, `{"step":`+itoa(c.step)+`}`)
		if r.Outcome != tools.OutcomeOK {
			t.Errorf("from %d step %d: %+v", c.from, c.step, r)
			continue
		}
		var res struct{ Previous, Volume int }
		if json.Unmarshal([]byte(r.Content), &res) != nil || res.Previous != c.from || res.Volume != c.want {
			t.Errorf("from %d step %d: result %s, want previous %d volume %d", c.from, c.step, r.Content, c.from, c.want)
		}
		if v := f.getVolume(); v != c.want {
			t.Errorf("from %d step %d: device volume %d, want %d", c.from, c.step, v, c.want)
		}
		calls := f.callsOf(toolSetVolume)[before:]
		switch {
		case c.set && (len(calls) != 1 || calls[0].args["volume"] != float64(c.want)):
			t.Errorf("from %d step %d: set_volume calls %+v, want one with %d", c.from, c.step, calls, c.want)
		case !c.set && len(calls) != 0:
			t.Errorf("from %d step %d: set_volume called %+v for no change", c.from, c.step, calls)
		}
	}
	for _, args := range []string{`{}`, `{"step":1.5}`, `{"step":150}`, `{"step":"up"}`} {
		if r := runTool(t, dev, toolAdjustVolume, args); r.Outcome != tools.OutcomeBadArgs {
			t.Errorf("adjust_volume %s: %s, want bad arguments", args, r.Outcome)
		}
	}
	d.close()
	ts.waitIdle(t)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestAdjustVolumeOffered: adjust_volume needs both the status and the
// set_volume tool of the device.
func TestAdjustVolumeOffered(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, nil)
	all := firmwareTools()
	d, dev := dialTools(t, ts, got, &fakeMCP{tools: all[:1]}) // the status tool alone
	waitListed(t, dev, 10*time.Second)
	if names := toolNames(dev.Tools()); !slices.Equal(names, []string{toolDeviceStatus}) {
		t.Errorf("tools %q, want the status tool alone", names)
	}
	d.close()
	ts.waitIdle(t)
}

func TestSpeakerVolume(t *testing.T) {
	for status, want := range map[string]int{
		`{"audio_speaker":{"volume":70},"screen":{"brightness":80}}`: 70,
		`{"audio_speaker":{"volume":130}}`:                           100,
		`{"audio_speaker":{"volume":-3}}`:                            0,
		`{"audio_speaker":{"volume":42.6}}`:                          43,
	} {
		if got, err := speakerVolume(status); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", status, got, err, want)
		}
	}
	for _, status := range []string{`true`, `not json`, `{"screen":{}}`, `{"audio_speaker":{"volume":"loud"}}`} {
		if _, err := speakerVolume(status); err == nil {
			t.Errorf("%s: accepted", status)
		}
	}
}

// TestDeviceToolErrors: a device's JSON-RPC error, an isError result, a
// call the device never answers and one it answers late each give the
// model a clear outcome, and the session goes on.
func TestDeviceToolErrors(t *testing.T) {
	checkLeaks(t)
	const timeout = 300 * time.Millisecond
	ts, got := newToolServer(t, func(c *Config) { c.MCPTimeout = timeout })
	ft := append(firmwareTools(),
		fakeTool{name: "self.led.set_color", description: "Set the LED color.", props: []fakeProp{{name: "color", typ: "string"}},
			run: func(*fakeMCP, map[string]any) (string, error) { return "", errors.New("LED strip not connected") }},
		fakeTool{name: "self.battery.calibrate", description: "Calibrate the battery gauge.", isError: true,
			run: func(*fakeMCP, map[string]any) (string, error) { return "charger not plugged in", nil }},
	)
	f := &fakeMCP{tools: ft, volume: 50,
		silent: map[string]bool{"self.screen.set_brightness": true},
		delay:  map[string]time.Duration{"self.screen.set_theme": 2 * timeout}}
	d, dev := dialTools(t, ts, got, f)
	waitListed(t, dev, 10*time.Second)

	r := runTool(t, dev, "self_led_set_color", `{"color":"red"}`)
	var de *DeviceError
	if r.Outcome != tools.OutcomeError || !errors.As(r.Err, &de) || !strings.Contains(r.Content, "LED strip not connected") {
		t.Errorf("JSON-RPC error: %+v", r)
	}
	r = runTool(t, dev, "self_battery_calibrate", `{}`)
	if r.Outcome != tools.OutcomeError || !strings.Contains(r.Content, "charger not plugged in") {
		t.Errorf("isError result: %+v", r)
	}
	r = runTool(t, dev, "self_screen_set_brightness", `{"brightness":10}`)
	if r.Outcome != tools.OutcomeTimeout || r.Duration < timeout || r.Duration > timeout+time.Second {
		t.Errorf("never answered: %s after %v, want a timeout after about %v (%s)", r.Outcome, r.Duration, timeout, r.Content)
	}
	r = runTool(t, dev, "self_screen_set_theme", `{"theme":"dark"}`)
	if r.Outcome != tools.OutcomeTimeout {
		t.Errorf("answered late: %s (%s), want a timeout", r.Outcome, r.Content)
	}
	time.Sleep(2 * timeout) // the late answer arrives and is dropped

	// The session goes on, and the next answer is the next call's.
	r = runTool(t, dev, "self_get_device_status", `{}`)
	if r.Outcome != tools.OutcomeOK || !strings.Contains(r.Content, `"audio_speaker":{"volume":50}`) {
		t.Errorf("after the errors: %+v", r)
	}
	if d.has(0, isMsg(typeError, "")) {
		t.Errorf("the device was sent an error message: %s", d.summary())
	}
	d.close()
	ts.waitIdle(t)
}

// TestDeviceToolsDisconnect: a device that leaves while a call waits on it
// fails the call at once with an error wrapping tools.ErrUnavailable.
func TestDeviceToolsDisconnect(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, func(c *Config) { c.MCPTimeout = 10 * time.Second })
	f := &fakeMCP{tools: firmwareTools(), silent: map[string]bool{"self.screen.set_brightness": true}}
	d, dev := dialTools(t, ts, got, f)
	waitListed(t, dev, 10*time.Second)
	from := len(d.mcpRequests())
	done := make(chan tools.Result, 1)
	go func() { done <- runTool(t, dev, "self_screen_set_brightness", `{"brightness":10}`) }()
	d.waitMCP("tools/call", from, 5*time.Second, func(m rpcMessage) bool { return m.Method == "tools/call" })
	start := time.Now()
	d.close()
	select {
	case r := <-done:
		if r.Outcome != tools.OutcomeError || !errors.Is(r.Err, tools.ErrUnavailable) {
			t.Errorf("call during the disconnect: %s, %v", r.Outcome, r.Err)
		}
		t.Logf("failed %v after the close", time.Since(start))
	case <-time.After(3 * time.Second):
		t.Fatal("the call still waits 3 s after the device left")
	}
	ts.waitIdle(t)
	if r := runTool(t, dev, "self_get_device_status", `{}`); !errors.Is(r.Err, tools.ErrUnavailable) {
		t.Errorf("call after the disconnect: %s, %v", r.Outcome, r.Err)
	}
}

// TestDeviceToolsWaitForList: a device's next session offers the tools of
// its last at once; a call made before this session's list has come
// waits for it, but at most mcp_list_wait; a device whose list never comes
// loses its tools.
func TestDeviceToolsWaitForList(t *testing.T) {
	checkLeaks(t)
	const listWait = 400 * time.Millisecond
	ts, got := newToolServer(t, func(c *Config) { c.MCPListWait, c.MCPTimeout = listWait, 1500*time.Millisecond })
	d, dev := dialTools(t, ts, got, &fakeMCP{tools: firmwareTools()})
	waitListed(t, dev, 10*time.Second)
	want := toolNames(dev.Tools())
	d.close()
	ts.waitIdle(t)

	// The list comes late but within mcp_list_wait: the call waits for it.
	f := &fakeMCP{tools: firmwareTools(), delay: map[string]time.Duration{"tools/list": listWait / 2}}
	d, dev = dialTools(t, ts, got, f)
	if names := toolNames(dev.Tools()); !slices.Equal(names, want) {
		t.Fatalf("tools before the list %q, want the last session's %q", names, want)
	}
	r := runTool(t, dev, "self_audio_speaker_set_volume", `{"volume":20}`)
	if r.Outcome != tools.OutcomeOK || f.getVolume() != 20 {
		t.Fatalf("call before the list: %+v", r)
	}
	if dev.listed.Err() == nil {
		t.Error("the call went out before the list had come")
	}
	d.close()
	ts.waitIdle(t)

	// The list never comes: the call waits mcp_list_wait, then goes with
	// the last session's tools; once tools/list times out the tools go.
	f = &fakeMCP{tools: firmwareTools(), silent: map[string]bool{"tools/list": true}}
	d, dev = dialTools(t, ts, got, f)
	start := time.Now()
	r = runTool(t, dev, "self_audio_speaker_set_volume", `{"volume":70}`)
	if el := time.Since(start); r.Outcome != tools.OutcomeOK || f.getVolume() != 70 || el < listWait || el > listWait+time.Second {
		t.Errorf("call with no list: %+v after %v, want it to go after about %v", r, el, listWait)
	}
	waitListed(t, dev, 5*time.Second)
	if names := toolNames(dev.Tools()); len(names) != 0 {
		t.Errorf("tools %q after tools/list failed, want none", names)
	}
	d.close()
	ts.waitIdle(t)
}

// TestDeviceToolsSessionOnly: the device tools join a copy of the
// server's tool providers (another session's must not see them); a
// device without MCP, or a server with device tools off, sends no MCP,
// and a device's own ping request is answered all the same.
func TestDeviceToolsSessionOnly(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, nil)
	shared := make([]tools.Provider, 1, 4) // room to append in place: the bug this guards against
	shared[0] = tools.Static{}
	ts.h.host.Backends.Tools = shared
	d, dev := dialTools(t, ts, got, &fakeMCP{tools: firmwareTools()})
	waitListed(t, dev, 10*time.Second)
	if extra := shared[:cap(shared)][1]; extra != nil {
		t.Errorf("the server's tool providers were appended to in place: %v", extra)
	}
	d.close()
	ts.waitIdle(t)

	d = dialDevice(t, ts.wsURL(), deviceOpts{noMCP: true, mcp: &fakeMCP{tools: firmwareTools()}})
	d.sendMCP(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	i := d.waitMCP("ping answer", 0, 5*time.Second, func(m rpcMessage) bool { return string(m.ID) == "5" })
	if m := d.mcpRequests(); i != 0 || string(m[0].Result) != "{}" {
		t.Errorf("mcp to a device without MCP: %+v, want only the ping answer", m)
	}
	select {
	case <-got:
		t.Error("device tools for a device without MCP")
	case <-time.After(200 * time.Millisecond):
	}
	d.close()
	ts.waitIdle(t)

	off, offGot := newToolServer(t, func(c *Config) { c.DeviceTools = false })
	d = dialDevice(t, off.wsURL(), deviceOpts{mcp: &fakeMCP{tools: firmwareTools()}})
	d.sendJSON(map[string]any{"type": "ping"})
	d.waitFor("pong", 0, 5*time.Second, isMsg(typePong, ""))
	select {
	case <-offGot:
		t.Error("device tools with device_tools off")
	default:
	}
	if m := d.mcpRequests(); len(m) != 0 {
		t.Errorf("mcp sent with device tools off: %+v", m)
	}
	d.close()
	off.waitIdle(t)
}

// toolModel calls one tool on a turn's first request and answers in words
// once the result is back (a request ending with a tool message).
type toolModel struct {
	call llm.ToolCall

	mu       sync.Mutex
	requests []llm.Request
}

func (m *toolModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	tok := llm.Token{ToolCalls: []llm.ToolCall{m.call}, Done: true}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == llm.RoleTool {
		tok = llm.Token{Text: "The volume is set.", Done: true}
	}
	out := make(chan llm.Token, 1)
	out <- tok
	close(out)
	return out, nil
}

func (m *toolModel) snapshot() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// TestDeviceToolsVoiceTurn: a spoken turn whose model calls set_volume
// sets the device's volume through its own MCP tool, and the model hears
// the result.
func TestDeviceToolsVoiceTurn(t *testing.T) {
	checkLeaks(t)
	ts, got := newToolServer(t, nil)
	m := &toolModel{call: llm.ToolCall{ID: "call_1", Name: "self_audio_speaker_set_volume", Arguments: `{"volume":30}`}}
	ts.h.host.Backends.LLM = m
	f := &fakeMCP{tools: firmwareTools(), volume: 60}
	d, dev := dialTools(t, ts, got, f)
	waitListed(t, dev, 10*time.Second)
	from := speakTurn(t, ts, d, modeAuto, false)
	d.waitFor("tts stop", from, 20*time.Second, isMsg(typeTTS, ttsStop))

	calls := f.callsOf(toolSetVolume)
	if len(calls) != 1 || f.getVolume() != 30 {
		t.Fatalf("set_volume calls %+v, volume %d; want one call setting 30", calls, f.getVolume())
	}
	reqs := m.snapshot()
	if len(reqs) < 2 {
		t.Fatalf("%d model requests, want the call's and the answer's", len(reqs))
	}
	var offered []string
	for _, tl := range reqs[0].Tools {
		offered = append(offered, tl.Name)
	}
	if !slices.Contains(offered, "self_audio_speaker_set_volume") || !slices.Contains(offered, toolAdjustVolume) {
		t.Errorf("the turn offered %q", offered)
	}
	last := reqs[len(reqs)-1].Messages
	if r := last[len(last)-1]; r.Role != llm.RoleTool || r.ToolCallID != "call_1" || r.Content != "true" {
		t.Errorf("the model got back %+v", r)
	}
	// The figure of docs/xiaozhi.md: from the end of speech (speech_end is
	// marked at the audio's end, so it includes the VAD's end silence) and
	// from the final transcript to the device's tool.
	var marks map[string]time.Time
	for deadline := time.Now().Add(5 * time.Second); marks == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ts.obs.mu.Lock()
		for _, tr := range ts.obs.traces {
			if _, ok := tr.Marks[pipeline.MarkSpeechEnd]; ok {
				marks = tr.Marks
			}
		}
		ts.obs.mu.Unlock()
	}
	if marks != nil {
		t.Logf("set_volume reached the device %v after speech_end, %v after asr_final",
			calls[0].at.Sub(marks[pipeline.MarkSpeechEnd]).Round(time.Millisecond), calls[0].at.Sub(marks[pipeline.MarkASRFinal]).Round(time.Microsecond))
	}
	d.close()
	ts.waitIdle(t)
}

// BenchmarkDeviceToolCall is one set_volume call as a turn makes it
// (tools.Set → tools/call over the device WebSocket → the fake firmware's
// answer), on loopback.
func BenchmarkDeviceToolCall(b *testing.B) {
	ts, got := newToolServer(b, nil)
	f := &fakeMCP{tools: firmwareTools()}
	d, dev := dialTools(b, ts, got, f)
	waitListed(b, dev, 10*time.Second)
	set := tools.NewSet(tools.Limits{}, dev)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		args := `{"volume":` + itoa(i%101) + `}`
		if r := set.Run(ctx, nil, []llm.ToolCall{{ID: "c", Name: "self_audio_speaker_set_volume", Arguments: args}})[0]; r.Outcome != tools.OutcomeOK {
			b.Fatalf("set_volume: %+v", r)
		}
	}
	b.StopTimer()
	d.close()
	ts.waitIdle(b)
}
