package xiaozhi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Device → server message types (reference §6.1) and the listen states.
const (
	typeHello   = "hello"
	typeListen  = "listen"
	typeAbort   = "abort"
	typeMCP     = "mcp"
	typeIoT     = "iot"     // legacy firmware (≤ v1.7): accepted and ignored
	typePing    = "ping"    // non-device clients; answered with pong
	typeGoodbye = "goodbye" // MQTT firmware and some clients: ends the session

	listenStart  = "start"
	listenStop   = "stop"
	listenDetect = "detect"

	modeAuto     = "auto"
	modeManual   = "manual"
	modeRealtime = "realtime"
)

// Server → device message types (reference §6.2) and tts states.
const (
	typeSTT   = "stt"
	typeLLM   = "llm"
	typeTTS   = "tts"
	typeError = "error" // voxpipe's own: the firmware logs and ignores unknown types
	typePong  = "pong"

	ttsStart         = "start"
	ttsSentenceStart = "sentence_start"
	ttsStop          = "stop"
)

// errMessage is the reason a text message was refused.
var errMessage = errors.New("xiaozhi: bad message")

// flexInt is an integer that devices and test clients may also send as a
// string ("16000") or a float (16000.0).
type flexInt int

func (n *flexInt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	if string(b) == "null" || len(b) == 0 {
		*n = 0
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f != float64(int(f)) || f > 1<<31 || f < -(1<<31) {
		return fmt.Errorf("%q is not an integer", b)
	}
	*n = flexInt(f)
	return nil
}

// flexBool is a boolean that may also come as 0/1 or "true"/"false".
type flexBool bool

func (v *flexBool) UnmarshalJSON(b []byte) error {
	switch string(bytes.Trim(bytes.TrimSpace(b), `"`)) {
	case "true", "1":
		*v = true
	case "false", "0", "null", "":
		*v = false
	default:
		return fmt.Errorf("%s is not a boolean", b)
	}
	return nil
}

type audioParams struct {
	Format        string  `json:"format"`
	SampleRate    flexInt `json:"sample_rate"`
	Channels      flexInt `json:"channels"`
	FrameDuration flexInt `json:"frame_duration"`
}

// deviceMessage is any JSON message a device sends; Type says which fields
// matter. Unknown fields are ignored.
type deviceMessage struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`

	// hello
	Version     flexInt      `json:"version"`
	Transport   string       `json:"transport"`
	Features    features     `json:"features"`
	AudioParams *audioParams `json:"audio_params"`

	// listen
	State string `json:"state"`
	Mode  string `json:"mode"`
	Text  string `json:"text"` // the wake word of listen detect

	// abort
	Reason string `json:"reason"`

	// mcp: a JSON-RPC 2.0 object
	Payload json.RawMessage `json:"payload"`
}

type features struct {
	MCP flexBool `json:"mcp"`
	AEC flexBool `json:"aec"`
}

// parseDeviceMessage reads one text message. It refuses what is not a JSON
// object with a string type, and a hello or listen whose fields cannot be
// served; unknown types are returned for the caller to ignore.
func parseDeviceMessage(data []byte) (deviceMessage, error) {
	var m deviceMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%w: not a JSON object of the xiaozhi protocol: %w", errMessage, err)
	}
	switch m.Type {
	case "":
		return m, fmt.Errorf(`%w: message without "type"`, errMessage)
	case typeHello:
		if m.Transport != "" && m.Transport != "websocket" {
			return m, fmt.Errorf("%w: hello transport %q (this endpoint serves websocket)", errMessage, m.Transport)
		}
		if v := int(m.Version); v < 0 || v > 3 {
			return m, fmt.Errorf("%w: hello version %d (want 1, 2 or 3)", errMessage, v)
		}
		if ap := m.AudioParams; ap != nil {
			if ap.Format != "" && ap.Format != "opus" {
				return m, fmt.Errorf("%w: hello audio format %q (want opus)", errMessage, ap.Format)
			}
			if ap.Channels > 1 {
				return m, fmt.Errorf("%w: hello audio with %d channels (want 1)", errMessage, ap.Channels)
			}
		}
	case typeListen:
		switch m.State {
		case listenStart, listenStop, listenDetect:
		default:
			return m, fmt.Errorf("%w: listen state %q (want start, stop or detect)", errMessage, m.State)
		}
	case typeMCP:
		if len(m.Payload) == 0 || m.Payload[0] != '{' {
			return m, fmt.Errorf("%w: mcp message without a JSON-RPC object in payload", errMessage)
		}
	}
	return m, nil
}

// listenMode maps a listen start's mode onto the three the server knows:
// unknown ones (some clients send "ptt") are push-to-talk when they say so,
// else auto.
func listenMode(mode string) string {
	switch mode {
	case modeManual, "ptt", "push_to_talk":
		return modeManual
	case modeRealtime:
		return modeRealtime
	}
	return modeAuto
}

// Server → device messages. Every one carries session_id and the fields
// the firmware reads without checking (tts always has state).

type serverHello struct {
	Type        string           `json:"type"`
	Transport   string           `json:"transport"`
	SessionID   string           `json:"session_id"`
	Version     int              `json:"version"`
	AudioParams serverAudioParam `json:"audio_params"`
}

type serverAudioParam struct {
	Format        string `json:"format"`
	SampleRate    int    `json:"sample_rate"`
	Channels      int    `json:"channels"`
	FrameDuration int    `json:"frame_duration"`
}

type sttMessage struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	SessionID string `json:"session_id"`
}

type llmMessage struct {
	Type      string `json:"type"`
	Emotion   string `json:"emotion"`
	Text      string `json:"text"`
	SessionID string `json:"session_id"`
}

type ttsMessage struct {
	Type      string `json:"type"`
	State     string `json:"state"`
	Text      string `json:"text,omitempty"`
	SessionID string `json:"session_id"`
}

type mcpMessage struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	Payload   json.RawMessage `json:"payload"`
}

type errorMessage struct {
	Type      string `json:"type"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	SessionID string `json:"session_id"`
}

type pongMessage struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
}

func helloReply(sessionID string, version, rate int) serverHello {
	return serverHello{Type: typeHello, Transport: "websocket", SessionID: sessionID, Version: version,
		AudioParams: serverAudioParam{Format: "opus", SampleRate: rate, Channels: 1, FrameDuration: frameDurationMs}}
}

// emotionEmoji is the emoji sent with an llm emotion (what the device's
// default emoji set shows for it).
var emotionEmoji = map[string]string{
	"neutral": "🙂", "happy": "😊", "laughing": "😆", "funny": "😂", "sad": "😔", "angry": "😠",
	"crying": "😭", "loving": "😍", "embarrassed": "😳", "surprised": "😯", "shocked": "😱",
	"thinking": "🤔", "winking": "😉", "cool": "😎", "relaxed": "😌", "delicious": "🤤",
	"kissy": "😘", "confident": "😏", "sleepy": "😴", "silly": "😜", "confused": "🙄",
}
