package xiaozhi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// maxOTABody bounds the OTA POST; real system-info bodies are 1-3 kB.
const maxOTABody = 64 << 10

// otaRequest is the part of the device's system information voxpipe reads
// (reference §2.2). Everything else in the body is ignored, and a body that
// does not parse is tolerated: the headers carry what matters.
type otaRequest struct {
	MacAddress  string `json:"mac_address"`
	UUID        string `json:"uuid"`
	Application struct {
		Version string `json:"version"`
	} `json:"application"`
	Board struct {
		Type string `json:"type"`
	} `json:"board"`
}

type otaResponse struct {
	ServerTime struct {
		Timestamp      int64 `json:"timestamp"`
		TimezoneOffset int   `json:"timezone_offset"`
	} `json:"server_time"`
	Firmware  *otaFirmware `json:"firmware,omitempty"`
	WebSocket otaWebSocket `json:"websocket"`
}

type otaFirmware struct {
	Version string `json:"version"`
	URL     string `json:"url"`
}

type otaWebSocket struct {
	URL     string `json:"url"`
	Token   string `json:"token"`
	Version int    `json:"version,omitempty"`
}

type otaError struct {
	Error string `json:"error"`
}

// numericVersion is what the firmware's version comparison can read
// (dot-separated numbers); anything else is not echoed back.
var numericVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)

// serveOTA answers the device's boot-time check with the WebSocket it
// should use, and never with mqtt (which the firmware would prefer).
func (h *Handler) serveOTA(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "voxpipe xiaozhi OTA is up; devices are sent to %s\n", h.wsURL(r)) //nolint:gosec // text/plain, never rendered as HTML
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		writeOTAError(w, http.StatusMethodNotAllowed, "use POST (the device's OTA check) or GET")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxOTABody+1))
	if err != nil {
		writeOTAError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	if len(body) > maxOTABody {
		writeOTAError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxOTABody))
		return
	}
	var info otaRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &info); err != nil {
			// Quirky firmware builds send odd bodies; the headers suffice.
			h.host.Log.Debug().Err(err).Str("remote", r.RemoteAddr).Msg("xiaozhi ota: unreadable system info, ignored")
		}
	}
	deviceID := r.Header.Get("Device-Id")
	if deviceID == "" {
		deviceID = info.MacAddress
	}
	clientID := r.Header.Get("Client-Id")
	if clientID == "" {
		clientID = info.UUID
	}
	log := h.host.Log.With().Str("remote", r.RemoteAddr).Str("device", deviceID).Str("client_id", clientID).
		Str("firmware", info.Application.Version).Str("board", info.Board.Type).Str("user_agent", r.UserAgent()).Logger()
	if deviceID == "" {
		log.Info().Msg("xiaozhi ota: refused, no Device-Id")
		writeOTAError(w, http.StatusBadRequest, "missing Device-Id header (and no mac_address in the body)")
		return
	}
	if !h.admit(deviceID) {
		log.Info().Msg("xiaozhi ota: refused, device not on the allow list")
		writeOTAError(w, http.StatusForbidden, "device "+deviceID+" is not on the allow list (server.xiaozhi.allowed_devices)")
		return
	}
	var resp otaResponse
	now := time.Now()
	resp.ServerTime.Timestamp = now.UnixMilli()
	if h.cfg.TimezoneOffsetMinutes != nil {
		resp.ServerTime.TimezoneOffset = *h.cfg.TimezoneOffsetMinutes
	} else {
		_, off := now.Zone()
		resp.ServerTime.TimezoneOffset = off / 60
	}
	// Echo the running version so the device never tries to upgrade.
	if v := info.Application.Version; numericVersion.MatchString(v) {
		resp.Firmware = &otaFirmware{Version: v}
	}
	resp.WebSocket = otaWebSocket{URL: h.wsURL(r), Token: h.cfg.Token}
	if h.cfg.ProtocolVersion > 1 {
		resp.WebSocket.Version = h.cfg.ProtocolVersion
	}
	log.Info().Str("websocket", resp.WebSocket.URL).Msg("xiaozhi ota check")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(resp)
}

// serveActivate answers the activation poll: voxpipe sends no activation
// challenge, so a device that polls anyway is told it is activated.
func (h *Handler) serveActivate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeOTAError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, "{}\n")
}

// wsURL is the WebSocket URL handed to devices: the configured one, or the
// WS path on the host the device reached the OTA endpoint at.
func (h *Handler) wsURL(r *http.Request) string {
	if h.cfg.WebSocketURL != "" {
		return h.cfg.WebSocketURL
	}
	scheme := "ws"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "wss"
	}
	return scheme + "://" + r.Host + h.cfg.WSPath
}

func writeOTAError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(otaError{Error: msg})
}
