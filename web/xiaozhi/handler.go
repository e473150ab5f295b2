package xiaozhi

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
)

// Host is what the web server lends the device endpoints: the pipeline,
// session slots shared with /ws and WebRTC, metrics and limits.
type Host struct {
	Backends pipeline.Backends
	Pipeline pipeline.Config   // the session template; rates are set per device
	Observer pipeline.Observer // labelled transport=xiaozhi
	// SessionObserver, when set, gives each device session its own
	// Observer (which knows the session and device: tracers, the trace
	// log) instead of Observer.
	SessionObserver func(SessionInfo) pipeline.Observer
	// Reserve takes a session slot: release frees it; a non-empty refusal
	// (server full, shutting down) is answered with HTTP 503.
	Reserve func() (release func(), refusal string)
	// Track registers a live connection for a forced shutdown (closeNow
	// cuts it); untrack when it ends. ok is false when the server is
	// shutting down.
	Track func(closeNow func()) (untrack func(), ok bool)
	// Authenticated says whether the server's access guard let r in on an
	// API key or session token, which then stands in for the device token.
	Authenticated func(r *http.Request) bool
	// CheckOrigin is the browser origin rule of the WebSocket upgrade (the
	// server's, as on /ws); nil = same origin only. Devices send no Origin.
	CheckOrigin func(r *http.Request) bool
	// Base parents every session's context; cancelled on shutdown.
	Base context.Context
	Log  zerolog.Logger
	// Rejected counts a client message refused (by error code); Dropped an
	// audio frame dropped (by reason).
	Rejected func(code string)
	Dropped  func(reason string)

	OpusBitrate   int
	MaxFrameBytes int
	IdleTimeout   time.Duration // read deadline, extended by any message or pong
	WriteTimeout  time.Duration
}

// Handler serves the OTA and WebSocket endpoints.
type Handler struct {
	cfg      Config
	host     Host
	allowed  map[string]bool
	upgrader websocket.Upgrader
}

// New checks cfg and returns the device endpoints.
func New(cfg Config, host Host) (*Handler, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, host: host, allowed: map[string]bool{}}
	for _, d := range cfg.AllowedDevices {
		h.allowed[normalizeID(d)] = true
	}
	h.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   4096,
		WriteBufferSize:  4096,
		// Devices send no Origin; a browser page is held to the server's
		// origin rule (the access guard has applied it too): the device
		// token is handed out by OTA, so it cannot keep out pages.
		CheckOrigin: host.CheckOrigin,
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			h.host.Rejected(pipeline.CodeBadMessage)
			http.Error(w, reason.Error(), status)
		},
	}
	return h, nil
}

// OTAPath and WSPath are where Mount serves the endpoints (the OTA path is
// a prefix: its activate endpoint lies below it).
func (h *Handler) OTAPath() string { return h.cfg.OTAPath }

// WSPath is the device WebSocket's path.
func (h *Handler) WSPath() string { return h.cfg.WSPath }

// Mount adds the endpoints to mux.
func (h *Handler) Mount(mux *http.ServeMux) {
	mux.HandleFunc(h.cfg.OTAPath, h.serveOTA)
	if !strings.HasSuffix(h.cfg.OTAPath, "/") {
		mux.HandleFunc(h.cfg.OTAPath+"/activate", h.serveActivate)
	} else {
		mux.HandleFunc(h.cfg.OTAPath+"activate", h.serveActivate)
	}
	mux.HandleFunc(h.cfg.WSPath, h.serveWS)
}

func normalizeID(id string) string { return strings.ToLower(strings.TrimSpace(id)) }

// admit applies the device policy.
func (h *Handler) admit(deviceID string) bool {
	return h.cfg.Devices == DevicesOpen || h.allowed[normalizeID(deviceID)]
}

// credentials reads the device's ids and token from the handshake headers,
// falling back to query parameters (browser clients cannot set headers).
func credentials(r *http.Request) (deviceID, clientID, auth string, version int) {
	q := r.URL.Query()
	pick := func(header, query string) string {
		if v := r.Header.Get(header); v != "" {
			return v
		}
		return q.Get(query)
	}
	deviceID = pick("Device-Id", "device-id")
	clientID = pick("Client-Id", "client-id")
	auth = pick("Authorization", "authorization")
	version, _ = strconv.Atoi(strings.TrimSpace(pick("Protocol-Version", "protocol-version")))
	return deviceID, clientID, auth, version
}

// DeviceTokenOK says whether r carries the configured device token (false
// when none is configured): the access guard takes it in place of an API
// key.
func (h *Handler) DeviceTokenOK(r *http.Request) bool {
	if h.cfg.Token == "" {
		return false
	}
	_, _, auth, _ := credentials(r)
	return h.tokenOK(auth)
}

// tokenOK checks an Authorization value against the configured token: the
// firmware sends "Bearer <token>" (or the token verbatim when it contains a
// space).
func (h *Handler) tokenOK(auth string) bool {
	if h.cfg.Token == "" {
		return true
	}
	got := strings.TrimSpace(auth)
	if rest, ok := strings.CutPrefix(got, "Bearer "); ok {
		got = strings.TrimSpace(rest)
	}
	want := h.cfg.Token
	if strings.Contains(want, " ") {
		got = strings.TrimSpace(auth)
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (h *Handler) serveWS(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		h.host.Rejected(pipeline.CodeBadMessage)
		http.Error(w, h.cfg.WSPath+" expects a WebSocket upgrade (the xiaozhi device protocol)", http.StatusBadRequest)
		return
	}
	deviceID, clientID, auth, version := credentials(r)
	badDevice := pipeline.CheckDevice(deviceID)
	switch {
	case deviceID == "":
		h.refuse(w, r, http.StatusBadRequest, "missing Device-Id header (or device-id query parameter)")
		return
	case badDevice != nil:
		h.refuse(w, r, http.StatusBadRequest, "Device-Id: "+badDevice.Error())
		return
	case !h.tokenOK(auth) && (h.host.Authenticated == nil || !h.host.Authenticated(r)):
		h.refuse(w, r, http.StatusUnauthorized, "missing or wrong Authorization token")
		return
	case !h.admit(deviceID):
		h.refuse(w, r, http.StatusForbidden, "device "+deviceID+" is not on the allow list (server.xiaozhi.allowed_devices)")
		return
	case version != 0 && (version < 1 || version > 3):
		h.refuse(w, r, http.StatusBadRequest, "Protocol-Version "+strconv.Itoa(version)+" (want 1, 2 or 3)")
		return
	}
	release, refusal := h.host.Reserve()
	if refusal != "" {
		w.Header().Set("Retry-After", "1")
		http.Error(w, refusal, http.StatusServiceUnavailable)
		return
	}
	defer release()
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	c := newConn(h, ws, deviceID, clientID, version, r.RemoteAddr)
	untrack, ok := h.host.Track(func() { _ = ws.Close() })
	if !ok {
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		_ = ws.Close()
		return
	}
	defer untrack()
	c.serve()
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.host.Rejected(pipeline.CodeBadMessage)
	h.host.Log.Info().Str("remote", r.RemoteAddr).Int("status", status).Str("reason", msg).Msg("xiaozhi connection refused")
	http.Error(w, msg, status)
}
