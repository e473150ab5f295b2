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

func guarded(cfg Config) http.Handler {
	return New(cfg).Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
}

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
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
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
