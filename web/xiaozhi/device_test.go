package xiaozhi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// fakeDevice behaves like the xiaozhi firmware (reference §3-§9, read in
// 78/xiaozhi-esp32 websocket_protocol.cc and application.cc): the handshake
// headers, a hello it waits 10 s to see answered (then it gives up and
// closes), 16 kHz 60 ms Opus packets up in the announced framing, and the
// device states: audio is accepted only while speaking (after tts start,
// until tts stop); the rest is dropped, as the firmware drops it.
type fakeDevice struct {
	t       testing.TB
	ws      *websocket.Conn
	version int
	enc     *audio.OpusEncoder
	packet  []byte
	frame   []byte

	hello serverHello

	mcp *fakeMCP   // answers the server's MCP requests; nil: none answered
	sid string     // the session id, as the reader saw the hello (the reader's)
	wmu sync.Mutex // one writer at a time: the test and the MCP answers

	mu       sync.Mutex
	msgs     []devMsg     // every server message, in order, but mcp
	mcpIn    []rpcMessage // every mcp payload the server sent, in order
	speaking bool
	dropped  int // audio packets that arrived while not speaking
	closed   bool
	news     chan struct{} // signalled (non-blocking) on every message
	readDone chan struct{}
}

// devMsg is one server message as the device saw it.
type devMsg struct {
	at      time.Time
	typ     string // message type, or "audio"
	state   string
	text    string
	emotion string
	samples int // audio: decoded samples
	audible bool
	raw     []byte
}

type deviceOpts struct {
	version      int           // binary framing; 0 = 1
	token        string        // sent as Authorization: Bearer
	deviceID     string        // "" = a default MAC
	helloTimeout time.Duration // 0 = the firmware's 10 s
	noHello      bool          // connect but send no hello
	noMCP        bool          // announce features.mcp false
	mcp          *fakeMCP      // the device's MCP server; nil answers no MCP
}

// dialDevice connects like the firmware and completes the hello exchange.
func dialDevice(t testing.TB, url string, o deviceOpts) *fakeDevice {
	t.Helper()
	d, err := tryDialDevice(t, url, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func tryDialDevice(t testing.TB, url string, o deviceOpts) (*fakeDevice, error) {
	if o.version == 0 {
		o.version = 1
	}
	if o.deviceID == "" {
		o.deviceID = "24:0a:c4:12:34:56"
	}
	if o.helloTimeout == 0 {
		o.helloTimeout = 10 * time.Second
	}
	h := http.Header{}
	if o.token != "" {
		h.Set("Authorization", "Bearer "+o.token)
	}
	h.Set("Protocol-Version", fmt.Sprint(o.version))
	h.Set("Device-Id", o.deviceID)
	h.Set("Client-Id", "5f1d2c1e-0000-4000-8000-1234567890ab")
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if resp != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	enc, err := audio.NewOpusEncoder(16000, 32000)
	if err != nil {
		_ = ws.Close()
		t.Skipf("no opus: %v", err)
	}
	d := &fakeDevice{t: t, ws: ws, version: o.version, enc: enc, packet: make([]byte, audio.MaxOpusPacket),
		frame: make([]byte, v2HeaderLen+audio.MaxOpusPacket), news: make(chan struct{}, 1), readDone: make(chan struct{}), mcp: o.mcp}
	t.Cleanup(d.close)
	if o.noHello {
		go d.read(nil)
		return d, nil
	}
	d.sendJSON(map[string]any{
		"type": "hello", "version": o.version, "transport": "websocket",
		"features":     map[string]any{"mcp": !o.noMCP, "glyph_push": false},
		"audio_params": map[string]any{"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60},
	})
	hello := make(chan serverHello, 1)
	go d.read(hello)
	select {
	case d.hello = <-hello:
		return d, nil
	case <-time.After(o.helloTimeout):
		// The firmware reports "server timeout", goes idle and abandons
		// the connection.
		d.close()
		return nil, errNoHelloReply
	}
}

var errNoHelloReply = errors.New("fake device: no server hello within the timeout, connection closed")

func (d *fakeDevice) close() {
	d.mu.Lock()
	already := d.closed
	d.closed = true
	d.mu.Unlock()
	if !already {
		_ = d.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = d.ws.Close()
	}
}

func (d *fakeDevice) sendJSON(v any) {
	d.t.Helper()
	m, _ := json.Marshal(v)
	var obj map[string]any
	_ = json.Unmarshal(m, &obj)
	if d.hello.SessionID != "" {
		obj["session_id"] = d.hello.SessionID // the firmware echoes it in every message
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if err := d.ws.WriteJSON(obj); err != nil {
		d.t.Errorf("device send %v: %v", v, err)
	}
}

func (d *fakeDevice) sendRaw(typ int, data []byte) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if err := d.ws.WriteMessage(typ, data); err != nil {
		d.t.Errorf("device send: %v", err)
	}
}

// sendOpus encodes one 60 ms frame (960 samples) and sends it framed.
func (d *fakeDevice) sendOpus(pcm []int16) error {
	n, err := d.enc.Encode(pcm, d.packet)
	if err != nil {
		return err
	}
	hl := headerLen(d.version)
	putHeader(d.version, d.frame, n, 0)
	copy(d.frame[hl:], d.packet[:n])
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.ws.WriteMessage(websocket.BinaryMessage, d.frame[:hl+n])
}

// stream sends pcm as 60 ms packets, one per 60 ms when paced (the
// firmware's microphone), as fast as possible when not.
func (d *fakeDevice) stream(pcm []int16, paced bool) {
	d.t.Helper()
	const frame = 960
	tick := time.NewTicker(packetDur)
	defer tick.Stop()
	buf := make([]int16, frame)
	for off := 0; off < len(pcm); off += frame {
		clear(buf)
		copy(buf, pcm[off:])
		if err := d.sendOpus(buf); err != nil {
			d.t.Errorf("device stream: %v", err)
			return
		}
		if paced {
			<-tick.C
		}
	}
}

// burst sends pcm as fast as the link allows, encoded as the firmware
// encodes its wake-word audio: on an encoder opened for the burst and
// closed after it (AfeAudioEngine::EncodeWakeWordData), so the main
// encoder's stream, which the question continues, is untouched.
func (d *fakeDevice) burst(pcm []int16) {
	d.t.Helper()
	enc, err := audio.NewOpusEncoder(16000, 32000)
	if err != nil {
		d.t.Errorf("device burst encoder: %v", err)
		return
	}
	main := d.enc
	d.enc = enc
	d.stream(pcm, false)
	d.enc = main
}

// streamUntil sends silence packets in real time until stop returns true
// (a device listening while the server thinks), at most for max.
func (d *fakeDevice) streamUntil(stop func() bool, max time.Duration) {
	silence := make([]int16, 960)
	tick := time.NewTicker(packetDur)
	defer tick.Stop()
	for end := time.Now().Add(max); time.Now().Before(end) && !stop(); <-tick.C {
		if d.sendOpus(silence) != nil {
			return
		}
	}
}

func (d *fakeDevice) read(hello chan<- serverHello) {
	defer close(d.readDone)
	var dec *audio.OpusDecoder
	pcm := make([]int16, 5760)
	for {
		typ, data, err := d.ws.ReadMessage()
		if err != nil {
			return
		}
		m := devMsg{at: time.Now(), raw: data}
		var gotHello *serverHello // told once the message is recorded
		if typ == websocket.TextMessage {
			var v struct {
				Type, State, Text, Emotion string
			}
			if err := json.Unmarshal(data, &v); err != nil {
				d.t.Errorf("server sent bad JSON %q: %v", data, err)
				continue
			}
			m.typ, m.state, m.text, m.emotion = v.Type, v.State, v.Text, v.Emotion
			if v.Type == typeMCP {
				d.onMCP(data)
				continue
			}
			if v.Type == typeHello && hello != nil {
				var h serverHello
				_ = json.Unmarshal(data, &h)
				if h.Transport != "websocket" {
					continue // the firmware ignores such a hello
				}
				rate := h.AudioParams.SampleRate
				if rate == 0 {
					rate = 24000
				}
				if dec, err = audio.NewOpusDecoder(rate); err != nil {
					d.t.Errorf("decoder at %d Hz: %v", rate, err)
					return
				}
				gotHello = &h
				d.sid = h.SessionID
			}
		} else {
			m.typ = "audio"
			payload, _, err := parseFrame(d.version, data)
			if err != nil {
				d.t.Errorf("server audio framing (v%d): %v", d.version, err)
				continue
			}
			if dec == nil {
				d.t.Errorf("audio before the server hello")
				continue
			}
			n, err := dec.Decode(payload, pcm)
			if err != nil {
				d.t.Errorf("undecodable server audio: %v", err)
				continue
			}
			m.samples, m.audible = n, audio.IsAudible(pcm[:n], dec.SampleRate())
		}
		d.mu.Lock()
		switch {
		case m.typ == typeTTS && m.state == ttsStart:
			d.speaking = true
		case m.typ == typeTTS && m.state == ttsStop:
			d.speaking = false
		case m.typ == "audio" && !d.speaking:
			d.dropped++
		}
		d.msgs = append(d.msgs, m)
		d.mu.Unlock()
		if gotHello != nil {
			// After recording it: a test that counts the messages once
			// dialDevice returns must count the hello among them.
			hello <- *gotHello
			hello = nil
		}
		select {
		case d.news <- struct{}{}:
		default:
		}
	}
}

// waitFor waits until match accepts a message received after index from,
// and returns its index.
func (d *fakeDevice) waitFor(what string, from int, timeout time.Duration, match func(devMsg) bool) int {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d.mu.Lock()
		for i := from; i < len(d.msgs); i++ {
			if match(d.msgs[i]) {
				d.mu.Unlock()
				return i
			}
		}
		n := len(d.msgs)
		d.mu.Unlock()
		select {
		case <-d.news:
		case <-d.readDone:
			d.t.Fatalf("connection ended waiting for %s (%d messages: %s)", what, n, d.summary())
		case <-time.After(time.Until(deadline)):
			d.t.Fatalf("no %s within %v (%d messages: %s)", what, timeout, n, d.summary())
		}
	}
}

func (d *fakeDevice) has(from int, match func(devMsg) bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := from; i < len(d.msgs); i++ {
		if match(d.msgs[i]) {
			return true
		}
	}
	return false
}

func (d *fakeDevice) snapshot() []devMsg {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]devMsg(nil), d.msgs...)
}

// summary lists the messages compactly: audio runs as counts.
func (d *fakeDevice) summary() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return summarize(d.msgs)
}

func summarize(msgs []devMsg) string {
	s, run := "", 0
	for _, m := range msgs {
		if m.typ == "audio" {
			run++
			continue
		}
		if run > 0 {
			s += fmt.Sprintf(" audio×%d", run)
			run = 0
		}
		s += " " + m.typ
		if m.state != "" {
			s += ":" + m.state
		}
	}
	if run > 0 {
		s += fmt.Sprintf(" audio×%d", run)
	}
	return s
}

func isMsg(typ, state string) func(devMsg) bool {
	return func(m devMsg) bool { return m.typ == typ && (state == "" || m.state == state) }
}

// v2Frame and v3Frame build uplink frames by hand, byte by byte as the
// firmware's BinaryProtocol2/3 structs lay them out (big-endian).
func v2Frame(payload []byte, ts uint32) []byte {
	b := make([]byte, 16+len(payload))
	binary.BigEndian.PutUint16(b[0:], 2)
	binary.BigEndian.PutUint16(b[2:], 0)
	binary.BigEndian.PutUint32(b[8:], ts)
	binary.BigEndian.PutUint32(b[12:], uint32(len(payload)))
	copy(b[16:], payload)
	return b
}

func v3Frame(payload []byte) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint16(b[2:], uint16(len(payload)))
	copy(b[4:], payload)
	return b
}

// onMCP records a server mcp message and lets the device's MCP server
// answer it.
func (d *fakeDevice) onMCP(data []byte) {
	var m struct {
		SessionID string          `json:"session_id"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		d.t.Errorf("server mcp message %s: %v", data, err)
		return
	}
	if m.SessionID != d.sid {
		d.t.Errorf("server mcp message for session %q, the device's is %q", m.SessionID, d.sid)
	}
	var p rpcMessage
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		d.t.Errorf("server mcp payload %s: %v", m.Payload, err)
		return
	}
	d.mu.Lock()
	d.mcpIn = append(d.mcpIn, p)
	d.mu.Unlock()
	if d.mcp != nil {
		d.mcp.serve(d, m.Payload)
	}
	select {
	case d.news <- struct{}{}:
	default:
	}
}

// mcpRequests returns the server's mcp payloads so far.
func (d *fakeDevice) mcpRequests() []rpcMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]rpcMessage(nil), d.mcpIn...)
}

// waitMCP waits for a server mcp payload after index from that match
// accepts and returns its index.
func (d *fakeDevice) waitMCP(what string, from int, timeout time.Duration, match func(rpcMessage) bool) int {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d.mu.Lock()
		for i := from; i < len(d.mcpIn); i++ {
			if match(d.mcpIn[i]) {
				d.mu.Unlock()
				return i
			}
		}
		n := len(d.mcpIn)
		d.mu.Unlock()
		select {
		case <-d.news:
		case <-d.readDone:
			d.t.Fatalf("connection ended waiting for mcp %s (%d mcp messages)", what, n)
		case <-time.After(time.Until(deadline)):
			d.t.Fatalf("no mcp %s within %v (%d mcp messages)", what, timeout, n)
		}
	}
}

// sendMCP sends a JSON-RPC payload up, as the firmware wraps it.
func (d *fakeDevice) sendMCP(payload string) {
	d.sendRaw(websocket.TextMessage, []byte(`{"session_id":"`+d.hello.SessionID+`","type":"mcp","payload":`+payload+`}`))
}

// fakeMCP is the firmware's MCP server (78/xiaozhi-esp32 main/mcp_server.cc
// and mcp_server.h, read at 48142026) as a server sees it: requests
// without jsonrpc "2.0", without a string method or without a numeric id
// are dropped unanswered; "notifications…" are ignored; initialize answers
// protocol 2024-11-05; tools/list pages at pageBytes and names the next
// page's first tool in nextCursor, hiding user-only tools unless
// withUserTools; tools/call checks each property's type, range and
// presence before the tool runs; errors carry only a message. silent and
// delay (keyed by method, or by tool name for tools/call) make a device
// that never answers or answers late.
type fakeMCP struct {
	pageBytes int // 0: the firmware's 8000
	tools     []fakeTool
	silent    map[string]bool
	delay     map[string]time.Duration

	mu         sync.Mutex
	volume     int
	calls      []fakeCall // tools/call requests that reached a tool
	initParams json.RawMessage
}

type fakeCall struct {
	name string
	args map[string]any
	at   time.Time // when it reached the tool
}

// fakeTool is a firmware McpTool: run gets the checked arguments and
// returns the text of the result, or an error (a JSON-RPC error reply).
type fakeTool struct {
	name, description string
	props             []fakeProp
	userOnly          bool
	// isError answers with the text as a result marked isError, as MCP
	// servers may (the firmware itself never does: its tools throw).
	isError bool
	run     func(f *fakeMCP, args map[string]any) (string, error)
}

// fakeProp is a firmware Property: "boolean", "integer" or "string";
// integers may have a range; a property with a default is optional.
type fakeProp struct {
	name, typ string
	min, max  *int
	def       any
}

func intp(v int) *int { return &v }

// firmwareTools are the common tools of the firmware (AddCommonTools and
// one user-only tool of AddUserOnlyTools), on a board with a backlight, a
// theme-capable screen and a camera.
func firmwareTools() []fakeTool {
	ok := func(*fakeMCP, map[string]any) (string, error) { return "true", nil }
	return []fakeTool{
		{name: toolDeviceStatus, description: "Provides the real-time information of the device, including the current status of the audio speaker, screen, battery, network, etc.",
			run: func(f *fakeMCP, _ map[string]any) (string, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				return fmt.Sprintf(`{"audio_speaker":{"volume":%d},"screen":{"brightness":80,"theme":"light"},"network":{"type":"wifi","ssid":"home","signal":"strong"}}`, f.volume), nil
			}},
		{name: toolSetVolume, description: "Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.",
			props: []fakeProp{{name: "volume", typ: "integer", min: intp(0), max: intp(100)}},
			run: func(f *fakeMCP, args map[string]any) (string, error) {
				f.mu.Lock()
				f.volume = int(args["volume"].(float64))
				f.mu.Unlock()
				return "true", nil
			}},
		{name: "self.screen.set_brightness", description: "Set the brightness of the screen.",
			props: []fakeProp{{name: "brightness", typ: "integer", min: intp(0), max: intp(100)}}, run: ok},
		{name: "self.screen.set_theme", description: "Set the theme of the screen. The theme can be `light` or `dark`.",
			props: []fakeProp{{name: "theme", typ: "string"}},
			run: func(_ *fakeMCP, args map[string]any) (string, error) {
				return fmt.Sprint(args["theme"] == "light" || args["theme"] == "dark"), nil
			}},
		{name: toolTakePhoto, description: "Always remember you have a camera. If the user asks you to see something, use this tool to take a photo and then explain it.",
			props: []fakeProp{{name: "question", typ: "string"}},
			run: func(*fakeMCP, map[string]any) (string, error) {
				return "", errors.New("Image explain URL or token is not set")
			}},
		{name: "self.reboot", description: "Reboot the device.", userOnly: true, run: ok},
	}
}

func (t fakeTool) json() string {
	props := map[string]any{}
	var required []string
	for _, p := range t.props {
		s := map[string]any{"type": p.typ}
		if p.def != nil {
			s["default"] = p.def
		} else {
			required = append(required, p.name)
		}
		if p.min != nil {
			s["minimum"], s["maximum"] = *p.min, *p.max
		}
		props[p.name] = s
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	v := map[string]any{"name": t.name, "description": t.description, "inputSchema": schema}
	if t.userOnly {
		v["annotations"] = map[string]any{"audience": []string{"user"}}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (t fakeTool) schema() json.RawMessage {
	var v struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	_ = json.Unmarshal([]byte(t.json()), &v)
	return v.InputSchema
}

func (f *fakeMCP) callsOf(name string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeMCP) setVolume(v int) {
	f.mu.Lock()
	f.volume = v
	f.mu.Unlock()
}

func (f *fakeMCP) getVolume() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.volume
}

func (f *fakeMCP) serve(d *fakeDevice, payload []byte) {
	var req struct {
		JSONRPC *string         `json:"jsonrpc"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
		ID      any             `json:"id"`
	}
	if json.Unmarshal(payload, &req) != nil || req.JSONRPC == nil || *req.JSONRPC != "2.0" || req.Method == nil {
		return
	}
	method := *req.Method
	if strings.HasPrefix(method, "notifications") {
		return
	}
	var params map[string]any
	if len(req.Params) > 0 && json.Unmarshal(req.Params, &params) != nil {
		return // params that are not an object: dropped
	}
	num, isNum := req.ID.(float64)
	if !isNum {
		return
	}
	id := int(num)
	key := method
	switch method {
	case "initialize":
		f.mu.Lock()
		f.initParams = req.Params
		f.mu.Unlock()
		f.reply(d, key, id, `{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"fake-board","version":"2.4.2"}}`, "")
	case "tools/list":
		cursor, _ := params["cursor"].(string)
		withUser, _ := params["withUserTools"].(bool)
		result, errMsg := f.page(cursor, withUser)
		f.reply(d, key, id, result, errMsg)
	case "tools/call":
		name, isStr := params["name"].(string)
		args, argsOK := params["arguments"].(map[string]any)
		switch {
		case params == nil:
			f.reply(d, key, id, "", "Missing params")
		case !isStr:
			f.reply(d, key, id, "", "Missing name")
		case params["arguments"] != nil && !argsOK:
			f.reply(d, key, id, "", "Invalid arguments")
		default:
			result, errMsg := f.call(name, args)
			f.reply(d, name, id, result, errMsg)
		}
	default:
		f.reply(d, key, id, "", "Method not implemented: "+method)
	}
}

// page is GetToolsList: tools from the one named cursor on, while the page
// stays under the size limit.
func (f *fakeMCP) page(cursor string, withUser bool) (string, string) {
	limit := f.pageBytes
	if limit == 0 {
		limit = 8000
	}
	out, next, found := `{"tools":[`, "", cursor == ""
	for _, t := range f.tools {
		if !found {
			if t.name != cursor {
				continue
			}
			found = true
		}
		if t.userOnly && !withUser {
			continue
		}
		tj := t.json() + ","
		if len(out)+len(tj)+30 > limit {
			next = t.name
			break
		}
		out += tj
	}
	out = strings.TrimSuffix(out, ",")
	if strings.HasSuffix(out, "[") && len(f.tools) > 0 {
		return "", "Failed to add tool " + next + " because of payload size limit"
	}
	if next == "" {
		return out + "]}", ""
	}
	return out + `],"nextCursor":"` + next + `"}`, ""
}

// call is DoToolCall: the arguments are checked against the properties
// first.
func (f *fakeMCP) call(name string, args map[string]any) (string, string) {
	var tool *fakeTool
	for i := range f.tools {
		if f.tools[i].name == name {
			tool = &f.tools[i]
		}
	}
	if tool == nil {
		return "", "Unknown tool: " + name
	}
	checked := map[string]any{}
	for _, p := range tool.props {
		v, found := args[p.name], false
		switch x := v.(type) {
		case bool:
			found = p.typ == "boolean"
		case float64:
			found = p.typ == "integer"
			if found {
				n := int(x)
				if p.min != nil && n < *p.min {
					return "", fmt.Sprintf("Value is below minimum allowed: %d", *p.min)
				}
				if p.max != nil && n > *p.max {
					return "", fmt.Sprintf("Value exceeds maximum allowed: %d", *p.max)
				}
				v = float64(n)
			}
		case string:
			found = p.typ == "string"
		}
		switch {
		case found:
			checked[p.name] = v
		case p.def != nil:
			checked[p.name] = p.def
		default:
			return "", "Missing valid argument: " + p.name
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{name: name, args: checked, at: time.Now()})
	f.mu.Unlock()
	text, err := tool.run(f, checked)
	if err != nil {
		return "", err.Error()
	}
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": tool.isError})
	return string(b), ""
}

// reply sends a result (or, with errMsg, an error) for id, unless key is
// silent; a delayed key is answered later from a timer.
func (f *fakeMCP) reply(d *fakeDevice, key string, id int, result, errMsg string) {
	if f.silent[key] {
		return
	}
	payload := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, id, result)
	if errMsg != "" {
		payload = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"message":"%s"}}`, id, errMsg)
	}
	msg := []byte(`{"session_id":"` + d.sid + `","type":"mcp","payload":` + payload + `}`)
	send := func() {
		d.wmu.Lock()
		defer d.wmu.Unlock()
		_ = d.ws.WriteMessage(websocket.TextMessage, msg) // the connection may be gone: so is the answer
	}
	if wait := f.delay[key]; wait > 0 {
		time.AfterFunc(wait, send)
		return
	}
	send()
}
