package access

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// testRules are the rules the web server gives its routes.
var testRules = map[string]Rule{
	"/ws": Session, "/rtc/offer": Session, "/rtc/config": Keyed, "/traces": Keyed,
	"/v1/models": Keyed, "/v1/chat/completions": Keyed, "/xiaozhi/v1/": Device, "/xiaozhi/ota/": DeviceSetup,
	TokenPath: TokenEndpoint,
}

var teapot = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })

// wrap routes each path to g by its rule in testRules (Open otherwise).
func wrap(g *Guard, device DeviceCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.Protect(testRules[r.URL.Path], teapot, device).ServeHTTP(w, r)
	})
}

func guarded(cfg Config) http.Handler { return wrap(New(cfg), nil) }

func do(h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.Host = "voice.example:8080"
	r.RemoteAddr = "192.0.2.7:4444"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func code(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var b struct {
		Code  string `json:"code"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return b.Code + b.Error.Code
}

// Same origin by default (issue 14 item 7): any page the user visits used
// to be able to open sessions to a local server.
func TestOrigin(t *testing.T) {
	h := guarded(Config{AllowedOrigins: []string{"https://app.example"}})
	for _, c := range []struct {
		path, origin string
		want         int
	}{
		{"/ws", "", http.StatusTeapot},                               // a device or voxclient
		{"/ws", "http://voice.example:8080", http.StatusTeapot},      // the server's own page
		{"/rtc/offer", "https://app.example", http.StatusTeapot},     // allowed
		{"/ws", "https://evil.example", http.StatusForbidden},        // any other page
		{"/rtc/offer", "https://evil.example", http.StatusForbidden}, // the same rule
		{"/v1/chat/completions", "http://evil.example", http.StatusForbidden},
		{"/ws", "null", http.StatusForbidden},
		{"/healthz", "https://evil.example", http.StatusTeapot}, // open paths
	} {
		w := do(h, "GET", c.path, "Origin", c.origin)
		if w.Code != c.want {
			t.Errorf("%s from %q: %d, want %d", c.path, c.origin, w.Code, c.want)
		} else if w.Code == http.StatusForbidden && code(t, w) != CodeOrigin {
			t.Errorf("%s from %q: code %s", c.path, c.origin, code(t, w))
		}
	}
	any := guarded(Config{AllowedOrigins: []string{"*"}})
	if w := do(any, "GET", "/ws", "Origin", "https://evil.example"); w.Code != http.StatusTeapot {
		t.Errorf("allowed_origins [*]: %d", w.Code)
	}
}

func TestKeysAndTokens(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	var rejected []string
	g := New(Config{Keys: ParseKeys(" k-one , ,k-two"), TokenTTL: time.Minute, Now: clk.now, OnReject: func(l string) { rejected = append(rejected, l) }})
	h := wrap(g, nil)
	for _, p := range []string{"/ws", "/rtc/offer", "/rtc/config", "/v1/models", "/xiaozhi/v1/", "/traces"} {
		w := do(h, "GET", p)
		if w.Code != http.StatusUnauthorized || code(t, w) != CodeUnauthorized || !strings.Contains(w.Body.String(), "Bearer") {
			t.Errorf("%s without a key: %d %s", p, w.Code, w.Body)
		}
	}
	if w := do(h, "GET", "/ws", "Authorization", "Bearer k-three"); w.Code != http.StatusUnauthorized {
		t.Errorf("wrong key: %d", w.Code)
	}
	for _, k := range []string{"k-one", "k-two"} {
		if w := do(h, "GET", "/ws", "Authorization", "Bearer "+k); w.Code != http.StatusTeapot {
			t.Errorf("key %s: %d", k, w.Code)
		}
	}
	if w := do(h, "GET", "/", "Origin", ""); w.Code != http.StatusTeapot {
		t.Errorf("the page: %d", w.Code)
	}
	// A token for the browser page.
	if w := do(h, "POST", TokenPath); w.Code != http.StatusUnauthorized {
		t.Errorf("token without a key: %d", w.Code)
	}
	w := do(h, "POST", TokenPath, "Authorization", "Bearer k-one")
	var tok struct {
		Token     string `json:"token"`
		ExpiresIn int    `json:"expires_in"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &tok); err != nil || tok.Token == "" || tok.ExpiresIn != 60 {
		t.Fatalf("token: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/ws?token="+tok.Token); w.Code != http.StatusTeapot {
		t.Errorf("?token=: %d", w.Code)
	}
	if w := do(h, "POST", "/rtc/offer", "Authorization", "Bearer "+tok.Token); w.Code != http.StatusTeapot {
		t.Errorf("Bearer token: %d", w.Code)
	}
	if w := do(h, "POST", TokenPath, "Authorization", "Bearer "+tok.Token); w.Code != http.StatusUnauthorized {
		t.Errorf("a token minting a token: %d", w.Code)
	}
	forged := []byte(tok.Token)
	forged[len(forged)-2] ^= 1
	if w := do(h, "GET", "/ws?token="+string(forged)); w.Code != http.StatusUnauthorized {
		t.Errorf("forged token: %d", w.Code)
	}
	clk.t = clk.t.Add(61 * time.Second)
	if w := do(h, "GET", "/ws?token="+tok.Token); w.Code != http.StatusUnauthorized {
		t.Errorf("expired token: %d", w.Code)
	}
	if len(rejected) == 0 || rejected[0] != RejectAuth {
		t.Errorf("OnReject saw %v", rejected)
	}
}

func TestSessionRate(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	h := guarded(Config{SessionsPerMinute: 3, Now: clk.now})
	for i := 0; i < 3; i++ {
		if w := do(h, "GET", "/ws"); w.Code != http.StatusTeapot {
			t.Fatalf("session %d: %d", i, w.Code)
		}
	}
	w := do(h, "GET", "/ws")
	if w.Code != http.StatusTooManyRequests || code(t, w) != CodeRateLimited || w.Header().Get("Retry-After") == "" {
		t.Errorf("4th session in a minute: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/v1/models"); w.Code != http.StatusTeapot {
		t.Errorf("the API is not a session: %d", w.Code)
	}
	clk.t = clk.t.Add(20 * time.Second) // one token back
	if w := do(h, "GET", "/rtc/offer"); w.Code != http.StatusTeapot {
		t.Errorf("after 20 s: %d", w.Code)
	}
	if w := do(h, "GET", "/ws"); w.Code != http.StatusTooManyRequests {
		t.Errorf("again at once: %d", w.Code)
	}
}

func TestRateMemoryBounded(t *testing.T) {
	g := New(Config{SessionsPerMinute: 1})
	for i := 0; i < maxBuckets+500; i++ {
		r := httptest.NewRequest("GET", "/ws", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16, i>>8&255, i&255)
		g.allowSession(r)
	}
	if n := len(g.buckets); n > maxBuckets {
		t.Errorf("%d buckets, want at most %d", n, maxBuckets)
	}
}

// DNS rebinding (issue 36 item 2): a page on evil.example, rebound to
// 127.0.0.1, sends Host: evil.example:PORT and a matching Origin, which
// the same-origin rule alone let through. A loopback server answers only
// to loopback names and server.allowed_hosts, on every rule, Open ones too.
func TestHost(t *testing.T) {
	var rejected []string
	g := New(Config{CheckHost: true, AllowedHosts: []string{"voice.lan", "Box.Example:8443"}, OnReject: func(l string) { rejected = append(rejected, l) }})
	h := wrap(g, nil)
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example:8080", "http://evil.example:8080", http.StatusForbidden},
		{"evil.example", "", http.StatusForbidden},
		{"localhost.evil.example:8080", "", http.StatusForbidden},
		{"127.0.0.1.nip.io:8080", "", http.StatusForbidden},
		{"", "", http.StatusForbidden},
		{"192.168.1.5:8080", "", http.StatusForbidden}, // not loopback, and AllowIPHosts is off
		{"[fe80::1%25eth0]:8080", "", http.StatusForbidden},
		{"localhost:8080", "http://localhost:8080", http.StatusTeapot},
		{"LOCALHOST.", "", http.StatusTeapot},
		{"127.0.0.1:8080", "", http.StatusTeapot},
		{"127.3.4.5:1", "", http.StatusTeapot},
		{"[::1]:8080", "http://[::1]:8080", http.StatusTeapot},
		{"[::1]", "", http.StatusTeapot},
		{"voice.lan:9000", "http://voice.lan:9000", http.StatusTeapot},
		{"box.example:8443", "", http.StatusTeapot},
		{"box.example:8080", "", http.StatusForbidden}, // allowed on 8443 only
	} {
		for _, path := range []string{"/traces", "/v1/chat/completions", "/ws", "/healthz", "/", "/xiaozhi/ota/"} {
			r := httptest.NewRequest("GET", path, nil)
			r.Host = c.host
			r.RemoteAddr = "127.0.0.1:4444"
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want {
				t.Errorf("%s with Host %q, Origin %q: %d, want %d", path, c.host, c.origin, w.Code, c.want)
			} else if w.Code == http.StatusForbidden && code(t, w) != CodeHost {
				t.Errorf("%s with Host %q: code %s", path, c.host, code(t, w))
			}
		}
	}
	if len(rejected) == 0 || rejected[0] != RejectHost {
		t.Errorf("OnReject saw %v", rejected)
	}
	lan := wrap(New(Config{CheckHost: true, AllowIPHosts: true}), nil)
	for host, want := range map[string]int{"192.168.1.5:8080": http.StatusTeapot, "[2001:db8::5]:80": http.StatusTeapot, "voxpipe.local:8080": http.StatusForbidden} {
		if w := do2(lan, host); w.Code != want {
			t.Errorf("AllowIPHosts, Host %q: %d, want %d", host, w.Code, want)
		}
	}
	if w := do2(guarded(Config{}), "evil.example"); w.Code != http.StatusTeapot {
		t.Errorf("CheckHost off: %d", w.Code)
	}
}

func do2(h http.Handler, host string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/ws", nil)
	r.Host = host
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The device WebSocket (issue 36 item 1): with keys set, a connection
// needs a key, a session token or the device credential; the origin rule
// and the session rate apply as on /ws.
func TestDeviceRule(t *testing.T) {
	device := func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer dev-token" }
	var principal string
	g := New(Config{Keys: []string{"the-key"}, SessionsPerMinute: 100})
	h := g.Protect(Device, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal = Principal(r)
		w.WriteHeader(http.StatusTeapot)
	}), device)
	for _, c := range []struct {
		hdr  []string
		want int
		who  string
	}{
		{nil, http.StatusUnauthorized, ""},
		{[]string{"Authorization", "Bearer wrong"}, http.StatusUnauthorized, ""},
		{[]string{"Authorization", "Bearer dev-token"}, http.StatusTeapot, ""},
		{[]string{"Authorization", "Bearer the-key"}, http.StatusTeapot, "key:"},
		{[]string{"Authorization", "Bearer the-key", "Origin", "http://evil.example"}, http.StatusForbidden, ""},
		{[]string{"Authorization", "Bearer dev-token", "Origin", "http://evil.example"}, http.StatusForbidden, ""},
	} {
		principal = ""
		w := do(h, "GET", "/xiaozhi/v1/?device-id=aa:bb:cc:dd:ee:ff", c.hdr...)
		if w.Code != c.want || !strings.HasPrefix(principal, c.who) || (c.who == "" && principal != "") {
			t.Errorf("%v: %d as %q, want %d as %q…", c.hdr, w.Code, principal, c.want, c.who)
		}
	}
	if strings.Contains(principal, "the-key") {
		t.Errorf("principal %q holds the key", principal)
	}
	// A refused device is told about the device token, not only keys.
	if w := do(h, "GET", "/xiaozhi/v1/"); !strings.Contains(w.Body.String(), "server.xiaozhi.token") {
		t.Errorf("refused device: %s, want the device token named", w.Body.String())
	}
	// Keyless: the device handler alone decides on its token.
	open := New(Config{}).Protect(Device, teapot, device)
	if w := do(open, "GET", "/xiaozhi/v1/"); w.Code != http.StatusTeapot {
		t.Errorf("keyless server, no credential: %d", w.Code)
	}
	if w := do(open, "GET", "/xiaozhi/v1/", "Origin", "https://evil.example"); w.Code != http.StatusForbidden {
		t.Errorf("keyless server, foreign origin: %d", w.Code)
	}
	rl := New(Config{SessionsPerMinute: 1}).Protect(Device, teapot, nil)
	do(rl, "GET", "/xiaozhi/v1/")
	if w := do(rl, "GET", "/xiaozhi/v1/"); w.Code != http.StatusTooManyRequests {
		t.Errorf("second device session in a minute: %d", w.Code)
	}
}

// Issue 36: the rate was keyed by the whole address, so one IPv6 host
// (which owns a /64) had 2^64 buckets, and each 127/8 address its own.
func TestRateKey(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"[2001:db8:1:2::1]:1", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:2"},
		{"[2001:db8:1:2::1%eth0]:1", "[2001:db8:1:2::9]:2"},
		{"127.0.0.1:1", "127.9.9.9:2"},
		{"127.0.0.1:1", "[::1]:2"},
		{"[::ffff:192.0.2.1]:1", "192.0.2.1:2"},
	} {
		if ka, kb := rateKey(&http.Request{RemoteAddr: c.a}), rateKey(&http.Request{RemoteAddr: c.b}); ka != kb {
			t.Errorf("%s → %q, %s → %q: want one bucket", c.a, ka, c.b, kb)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1"},
		{"192.0.2.1:1", "192.0.2.2:1"},
	} {
		if rateKey(&http.Request{RemoteAddr: c.a}) == rateKey(&http.Request{RemoteAddr: c.b}) {
			t.Errorf("%s and %s share a bucket", c.a, c.b)
		}
	}
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	g := New(Config{SessionsPerMinute: 2, Now: clk.now})
	for i, addr := range []string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::3]:1"} {
		ok := g.allowSession(&http.Request{RemoteAddr: addr})
		if ok != (i < 2) {
			t.Errorf("session %d from %s: allowed %v", i, addr, ok)
		}
	}
}
