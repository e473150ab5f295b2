package xiaozhi

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// ErrConfig is returned by New for an unusable Config.
var ErrConfig = errors.New("xiaozhi: invalid config")

// Device admission policies.
const (
	DevicesOpen      = "open"       // any device id is served
	DevicesAllowList = "allow_list" // only AllowedDevices
)

// frameDurationMs is the Opus packet length both ways: the firmware's
// uplink is fixed at 60 ms, and the downlink is announced as 60 ms too
// (the decoder of firmware older than v1.5.4 assumes it).
const frameDurationMs = 60

// Config configures the xiaozhi device endpoints (server.xiaozhi).
type Config struct {
	// OTAPath serves the device's OTA check (POST) and a status line (GET).
	OTAPath string
	// WSPath is the device WebSocket endpoint.
	WSPath string
	// WebSocketURL is the URL the OTA answer hands out; "" derives it from
	// the OTA request: ws://<Host header><WSPath> (wss behind TLS).
	WebSocketURL string
	// Token is handed out by OTA and, when set, required on the WebSocket
	// as "Authorization: Bearer <token>".
	Token string
	// ProtocolVersion is the binary framing the OTA answer asks for (1, 2
	// or 3; 1 is what every field device runs).
	ProtocolVersion int
	// Devices is DevicesOpen or DevicesAllowList; AllowedDevices holds
	// device ids (MAC addresses, any case) for the allow list.
	Devices        string
	AllowedDevices []string
	// OutputRate is the answer audio's Opus rate announced in the hello
	// (16000 or 24000; the firmware's default is 24000).
	OutputRate int
	// HelloTimeout is how long a device may take to send its hello after
	// the upgrade.
	HelloTimeout time.Duration
	// TTSStartLead is the least time between tts start and the turn's first
	// audio packet: the firmware switches to speaking on its main task and
	// drops audio that arrives before (reference §5.3).
	TTSStartLead time.Duration
	// IdleTimeout closes a session with no listen start, no recognised
	// speech and no answer for this long (a device left listening to
	// silence, or idle with its socket open).
	IdleTimeout time.Duration
	// Emotion is sent once per turn as the llm message ("" sends none).
	Emotion string
	// TimezoneOffsetMinutes is server_time.timezone_offset in the OTA
	// answer; nil uses the server's local zone.
	TimezoneOffsetMinutes *int
	// DeviceTools offers a device's own MCP tools to its session's turns:
	// after a hello with features.mcp the server initializes the device's
	// MCP server and lists its tools (mcp.go, devtools.go).
	DeviceTools bool
	// MCPTimeout bounds each request to a device's MCP server: initialize,
	// every tools/list page and every tools/call. A late answer is logged
	// and dropped.
	MCPTimeout time.Duration
	// MCPListWait is how long a tool call made before this session's tool
	// list has come waits for it (the tools offered meanwhile are those the
	// device listed in its last session).
	MCPListWait time.Duration
	// VisionURL and VisionToken are passed to the device in initialize
	// (capabilities.vision): the HTTP endpoint its camera tool uploads a
	// photo and question to. "" offers no camera tool, which would only
	// fail without it.
	VisionURL, VisionToken string

	// tools remembers each device's tool list for its next session; set by
	// validate, so that every Handler has its own.
	tools *toolCache
	// onDeviceTools, when set, sees each session's device tools as they
	// are made (tests reach them through it).
	onDeviceTools func(*deviceTools)
}

// SessionInfo names a device session for hooks.
type SessionInfo struct {
	ID, DeviceID, ClientID string
	// MCP is whether the device announced MCP support in its hello.
	MCP bool
}

// DefaultConfig returns the defaults documented in configs/default.yaml.
func DefaultConfig() Config {
	return Config{
		OTAPath:         "/xiaozhi/ota/",
		WSPath:          "/xiaozhi/v1/",
		ProtocolVersion: 1,
		Devices:         DevicesOpen,
		OutputRate:      24000,
		HelloTimeout:    10 * time.Second,
		TTSStartLead:    100 * time.Millisecond,
		IdleTimeout:     120 * time.Second,
		Emotion:         "neutral",
		DeviceTools:     true,
		MCPTimeout:      5 * time.Second,
		MCPListWait:     2 * time.Second,
	}
}

func (c Config) validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	for _, p := range []string{c.OTAPath, c.WSPath} {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " {}") {
			return bad("path %q (want an absolute path without spaces or braces)", p)
		}
	}
	if c.OTAPath == c.WSPath {
		return bad("ota_path and ws_path are both %q", c.OTAPath)
	}
	if u := c.WebSocketURL; u != "" && !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
		return bad("websocket_url %q (want ws:// or wss://)", u)
	}
	if c.ProtocolVersion < 1 || c.ProtocolVersion > 3 {
		return bad("protocol_version %d (want 1, 2 or 3)", c.ProtocolVersion)
	}
	switch c.Devices {
	case DevicesOpen, DevicesAllowList:
	default:
		return bad("devices %q (want open or allow_list)", c.Devices)
	}
	if c.OutputRate != 16000 && c.OutputRate != 24000 || !audio.ValidOpusRate(c.OutputRate) {
		return bad("output_rate %d (want 16000 or 24000)", c.OutputRate)
	}
	if c.HelloTimeout <= 0 || c.IdleTimeout <= 0 || c.TTSStartLead < 0 || c.TTSStartLead > time.Second {
		return bad("hello_timeout %v, idle_timeout %v (want > 0), tts_start_lead %v (want 0..1s)", c.HelloTimeout, c.IdleTimeout, c.TTSStartLead)
	}
	if _, ok := emotionEmoji[c.Emotion]; c.Emotion != "" && !ok {
		return bad("emotion %q (want one of the firmware's names, e.g. neutral, happy, thinking)", c.Emotion)
	}
	if c.MCPTimeout <= 0 || c.MCPTimeout > time.Minute || c.MCPListWait < 0 || c.MCPListWait > time.Minute {
		return bad("mcp_timeout %v (want 0..1m, not 0), mcp_list_wait %v (want 0..1m)", c.MCPTimeout, c.MCPListWait)
	}
	if u := c.VisionURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return bad("vision_url %q (want http:// or https://: the device uploads photos to it)", u)
	}
	c.tools = newToolCache(toolCacheDevices)
	return c, nil
}
