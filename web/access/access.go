// Package access decides who may use a voxpipe server: API keys (or
// short-lived session tokens minted with one), the browser origins that may
// open sessions, the Host names the server answers to (against DNS
// rebinding), and how fast one client address may open sessions. It is an
// http.Handler middleware: the web server names each route's Rule when it
// registers it, and Guard.Protect enforces it.
//
// Every rule checks the Host first. Then, by rule:
//   - Open (the page, /healthz, /metrics): nothing more.
//   - Keyed (/v1, /rtc/config, /traces): origin, then key or token.
//   - Session (/ws, /rtc/offer): origin, key or token, the per-IP rate.
//   - Device (the xiaozhi WebSocket): origin, a key, token or device
//     credential, the per-IP rate.
//   - DeviceSetup (the xiaozhi OTA check): origin.
//   - TokenEndpoint (POST /auth/token): origin, then a key (not a token).
//
// Refusals are 403 (host, origin), 401 (key) and 429 (rate) with a JSON
// body saying what to do; none is ever logged with the credential.
package access

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Error codes of refused requests (the "code" of the error body).
const (
	CodeUnauthorized = "unauthorized"
	CodeOrigin       = "forbidden_origin"
	CodeRateLimited  = "rate_limited"
	CodeHost         = "forbidden_host"
)

// Limit names given to Config.OnReject.
const (
	RejectOrigin = "origin"
	RejectAuth   = "auth"
	RejectRate   = "session_rate"
	RejectHost   = "host"
)

// TokenPath is the token endpoint.
const TokenPath = "/auth/token" //nolint:gosec // G101: a URL path, not a credential

// Config configures a Guard.
type Config struct {
	// Keys are the API keys; none turns auth off.
	Keys []string
	// TokenTTL is a session token's lifetime; 0 = 5 minutes.
	TokenTTL time.Duration
	// AllowedOrigins are origins (scheme://host[:port]) allowed besides the
	// server's own; "*" allows any. A request without Origin (not a
	// browser) is never refused for its origin.
	AllowedOrigins []string
	// CheckOrigin, when set, replaces the origin rule.
	CheckOrigin func(r *http.Request) bool
	// CheckHost refuses requests whose Host header is not a loopback name
	// (localhost, 127.0.0.0/8, ::1, any port), an IP literal when
	// AllowIPHosts is set, or one of AllowedHosts. A browser sends the
	// name it resolved as Host, so a page on a rebound name
	// (evil.example → 127.0.0.1) is refused even though its Origin matches
	// that Host.
	CheckHost bool
	// AllowIPHosts accepts any IP literal as Host (a rebinding page can
	// only ever send a name): for a keyless server on a LAN address.
	AllowIPHosts bool
	// AllowedHosts are further Host names, "name" (any port) or
	// "name:port", matched without case.
	AllowedHosts []string
	// SessionsPerMinute bounds new sessions per client IP (a burst of as
	// many); 0 = no bound.
	SessionsPerMinute int
	// OnReject, when set, is told each refusal's limit (for a metric).
	OnReject func(limit string)
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Guard enforces a Config.
type Guard struct {
	cfg     Config
	keys    [][]byte
	origins map[string]bool
	anyOrig bool
	hosts   map[string]bool // AllowedHosts, lower case
	secret  [32]byte        // signs session tokens; new per process

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the rate limiter's memory; beyond it, full buckets
// (clients idle long enough to have their whole burst back) are dropped.
const maxBuckets = 10000

// New returns a Guard for cfg.
func New(cfg Config) *Guard {
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Guard{cfg: cfg, origins: map[string]bool{}, hosts: map[string]bool{}, buckets: map[string]*bucket{}}
	for _, h := range cfg.AllowedHosts {
		g.hosts[strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")] = true
	}
	for _, k := range cfg.Keys {
		if k = strings.TrimSpace(k); k != "" {
			g.keys = append(g.keys, []byte(k))
		}
	}
	for _, o := range cfg.AllowedOrigins {
		if o == "*" {
			g.anyOrig = true
		}
		g.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	_, _ = rand.Read(g.secret[:]) // crypto/rand.Read does not fail on Linux
	return g
}

// ParseKeys splits a comma-separated key list (an environment variable's
// value), dropping blanks.
func ParseKeys(s string) []string {
	var keys []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// AuthOn says whether API keys are required.
func (g *Guard) AuthOn() bool { return len(g.keys) > 0 }

// Rule is what a route requires of a request (see the package comment).
type Rule int

// The rules, from the least guarded.
const (
	Open Rule = iota
	Keyed
	Session
	Device
	DeviceSetup
	TokenEndpoint
)

var ruleNames = [...]string{"open", "keyed", "session", "device", "device_setup", "token_endpoint"}

func (r Rule) String() string {
	if r < 0 || int(r) >= len(ruleNames) {
		return "rule(" + strconv.Itoa(int(r)) + ")"
	}
	return ruleNames[r]
}

// DeviceCheck says whether r carries a valid device credential (the
// xiaozhi device token); nil = devices have none.
type DeviceCheck func(r *http.Request) bool

type ctxKey struct{}

// Principal names who a request was let in as: "key:" and a short
// keyed hash of the API key (never the key), "token" for a session
// token, "" when no credential was checked or needed. The device
// endpoints use it to take an API key in place of the device token.
func Principal(r *http.Request) string {
	p, _ := r.Context().Value(ctxKey{}).(string)
	return p
}

// Protect guards next by rule; TokenEndpoint serves POST /auth/token
// itself and never calls next. device is the Device rule's credential
// check (ignored by the other rules).
func (g *Guard) Protect(rule Rule, next http.Handler, device DeviceCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r, ok := g.Admit(rule, w, r, device); ok {
			next.ServeHTTP(w, r)
		}
	})
}

// Admit applies rule to r: when it refuses it has answered w and returns
// false; otherwise it returns r, with its Principal when a key or token
// was checked. TokenEndpoint is answered here too (false).
func (g *Guard) Admit(rule Rule, w http.ResponseWriter, r *http.Request, device DeviceCheck) (*http.Request, bool) {
	if !g.HostOK(r) {
		g.refuse(w, r, http.StatusForbidden, RejectHost, CodeHost,
			"host "+strconv.Quote(r.Host)+" is not served here (a loopback server answers to localhost and loopback addresses only; see server.allowed_hosts)")
		return r, false
	}
	if rule == Open {
		return r, true
	}
	if !g.originOK(r) {
		g.refuse(w, r, http.StatusForbidden, RejectOrigin, CodeOrigin,
			"origin "+strconv.Quote(r.Header.Get("Origin"))+" may not use this server (same origin only; see server.allowed_origins)")
		return r, false
	}
	switch rule {
	case TokenEndpoint:
		g.serveToken(w, r)
		return r, false
	case DeviceSetup:
		return r, true
	}
	if g.AuthOn() {
		var who string
		switch {
		case g.keyOK(r):
			who = "key:" + g.keyID(bearer(r))
		case g.tokenOK(r):
			who = "token"
		case rule == Device && device != nil && device(r):
			// The device handler checks the device token itself too.
		case rule == Device:
			// A device sends the token its OTA check handed out, never a key.
			g.refuse(w, r, http.StatusUnauthorized, RejectAuth, CodeUnauthorized,
				"missing or invalid device token: a device sends the token of its OTA check (server.xiaozhi.token, which this server must set while API keys are on) as \"Authorization: Bearer <token>\"; a client may send an API key instead")
			return r, false
		default:
			g.refuse(w, r, http.StatusUnauthorized, RejectAuth, CodeUnauthorized,
				"missing or invalid API key: send \"Authorization: Bearer <key>\", or a session token from POST "+TokenPath+" as ?token=")
			return r, false
		}
		if who != "" {
			r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, who))
		}
	}
	if (rule == Session || rule == Device) && !g.allowSession(r) {
		g.refuseRate(w, r)
		return r, false
	}
	return r, true
}

// keyID is a short, keyed hash of an API key: it tells keys apart
// without revealing them.
func (g *Guard) keyID(key string) string {
	m := hmac.New(sha256.New, g.secret[:])
	m.Write([]byte("key-id:"))
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

func (g *Guard) refuseRate(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, 60/max(g.cfg.SessionsPerMinute, 1))))
	g.refuse(w, r, http.StatusTooManyRequests, RejectRate, CodeRateLimited,
		"too many new sessions from this address: at most "+strconv.Itoa(g.cfg.SessionsPerMinute)+" a minute")
}

func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, status int, limit, code, msg string) {
	if g.cfg.OnReject != nil {
		g.cfg.OnReject(limit)
	}
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="voxpipe"`)
	}
	w.WriteHeader(status)
	var body any = struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}{"error", code, msg}
	if strings.HasPrefix(r.URL.Path, "/v1") {
		// OpenAI clients parse OpenAI's error shape.
		body = map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// HostOK says whether r's Host header names this server (Config.CheckHost).
func (g *Guard) HostOK(r *http.Request) bool {
	if !g.cfg.CheckHost {
		return true
	}
	h := strings.TrimSuffix(strings.ToLower(r.Host), ".")
	if h == "" {
		return false
	}
	if g.hosts[h] {
		return true
	}
	name := h
	if n, _, err := net.SplitHostPort(h); err == nil {
		name = n
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		name = h[1 : len(h)-1]
	}
	name = strings.TrimSuffix(name, ".")
	if name == "localhost" || g.hosts[name] {
		return true
	}
	if strings.Contains(name, "%") { // a zone: not a name a browser sends
		return false
	}
	ip := net.ParseIP(name)
	return ip != nil && (ip.IsLoopback() || g.cfg.AllowIPHosts)
}

// OriginOK says whether r's Origin may use the server: none (not a
// browser), the server's own, or allowed.
func (g *Guard) OriginOK(r *http.Request) bool { return g.originOK(r) }

func (g *Guard) originOK(r *http.Request) bool {
	if g.cfg.CheckOrigin != nil {
		return g.cfg.CheckOrigin(r)
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if g.anyOrig || g.origins[strings.ToLower(o)] {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func (g *Guard) keyOK(r *http.Request) bool {
	k := []byte(bearer(r))
	if len(k) == 0 {
		return false
	}
	ok := 0
	for _, key := range g.keys {
		ok |= subtle.ConstantTimeCompare(k, key)
	}
	return ok == 1
}

// tokenOK accepts a session token as the Bearer credential or as the
// token query parameter (a browser cannot set headers on a WebSocket).
func (g *Guard) tokenOK(r *http.Request) bool {
	if t := bearer(r); t != "" && g.validToken(t) {
		return true
	}
	t := r.URL.Query().Get("token")
	return t != "" && g.validToken(t)
}

// A token is base64url(expiry unix seconds, 8 bytes | HMAC-SHA256 of them).
func (g *Guard) mint(exp time.Time) string {
	var b [8 + sha256.Size]byte
	binary.BigEndian.PutUint64(b[:8], uint64(exp.Unix()))
	m := hmac.New(sha256.New, g.secret[:])
	m.Write(b[:8])
	copy(b[8:], m.Sum(nil))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (g *Guard) validToken(t string) bool {
	b, err := base64.RawURLEncoding.DecodeString(t)
	if err != nil || len(b) != 8+sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, g.secret[:])
	m.Write(b[:8])
	if !hmac.Equal(m.Sum(nil), b[8:]) {
		return false
	}
	return g.cfg.Now().Unix() < int64(binary.BigEndian.Uint64(b[:8]))
}

// serveToken answers POST /auth/token, for a request with an API key, with
// a session token for a browser page: {"token": ..., "expires_in": s}.
func (g *Guard) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if !g.AuthOn() {
		g.refuse(w, r, http.StatusNotFound, RejectAuth, "auth_off", "auth is off (no API keys are set): no token is needed")
		return
	}
	if !g.keyOK(r) {
		g.refuse(w, r, http.StatusUnauthorized, RejectAuth, CodeUnauthorized, "a session token needs \"Authorization: Bearer <API key>\"")
		return
	}
	exp := g.cfg.Now().Add(g.cfg.TokenTTL)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		Token     string `json:"token"`
		ExpiresIn int    `json:"expires_in"`
	}{g.mint(exp), int(g.cfg.TokenTTL / time.Second)})
}

// rateKey is the bucket of the address the connection comes from
// (X-Forwarded-For is not trusted: any client can set it). An IPv6 client
// is keyed by its /64, the smallest block a network hands out, since one
// host can take any of the 2^64 addresses in it; every loopback address is
// one client, the machine itself.
func rateKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.Is6():
		p, _ := ip.WithZone("").Prefix(64) // cannot fail for a 128-bit address
		return p.String()
	}
	return ip.String()
}

// allowSession takes one token from the client IP's bucket.
func (g *Guard) allowSession(r *http.Request) bool {
	per := g.cfg.SessionsPerMinute
	if per <= 0 {
		return true
	}
	now := g.cfg.Now()
	ip := rateKey(r)
	rate := float64(per) / 60 // tokens per second
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.buckets[ip]
	if !ok {
		if len(g.buckets) >= maxBuckets {
			g.prune(now, rate, float64(per))
		}
		for ip := range g.buckets { // still full: forget arbitrary ones
			if len(g.buckets) < maxBuckets {
				break
			}
			delete(g.buckets, ip)
		}
		b = &bucket{tokens: float64(per), last: now}
		g.buckets[ip] = b
	}
	b.tokens = min(float64(per), b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (g *Guard) prune(now time.Time, rate, burst float64) {
	for ip, b := range g.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*rate >= burst {
			delete(g.buckets, ip)
		}
	}
}
