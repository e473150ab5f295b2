package web

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/web/access"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

const (
	walkKey     = "vp-walk-key-5d1e"
	walkDevice  = "dev-token-77c0"
	walkHost    = "127.0.0.1:8080"
	foreignHost = "evil.example:8080"
)

// walkServer is a server with every route mounted (the API, xiaozhi),
// API keys, a device token and the Host check a loopback server has.
func walkServer(t *testing.T, edit func(*Config)) *testServer {
	return newTestServer(t, nil, func(c *Config) {
		xc := xiaozhi.DefaultConfig()
		xc.Token = walkDevice
		c.Xiaozhi = &xc
		c.API = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
		c.Access = access.Config{Keys: []string{walkKey}, CheckHost: true}
		if edit != nil {
			edit(c)
		}
	})
}

// requestFor is a request that the mux matches to pattern.
func requestFor(pattern string) *http.Request {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	if pattern == access.TokenPath {
		method = http.MethodPost
	}
	path = strings.ReplaceAll(path, "{$}", "")
	for strings.Contains(path, "{") { // a wildcard: any segment
		i, j := strings.Index(path, "{"), strings.Index(path, "}")
		path = path[:i] + "x" + path[j+1:]
	}
	r := httptest.NewRequest(method, path, nil)
	r.Host = walkHost
	r.RemoteAddr = "127.0.0.1:50000"
	return r
}

func errorCode(w *httptest.ResponseRecorder) string {
	var b struct {
		Code  string `json:"code"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &b)
	return b.Code + b.Error.Code
}

// TestEveryRouteGuarded walks every route the server registered (the
// list handle builds, so a route added later is walked too) with no key,
// a wrong key, a foreign Origin and a foreign Host, and checks each
// refusal against the route's rule; Open and DeviceSetup routes must be
// ones this test knows to be public. A route put on the mux behind
// handle's back is refused outright.
func TestEveryRouteGuarded(t *testing.T) {
	ts := walkServer(t, nil)
	h := ts.srv.Handler()
	public := map[string]bool{"GET /healthz": true, "GET /metrics": true, "GET /{$}": true}
	page, _ := fs.ReadDir(uiFiles, "ui")
	for _, e := range page {
		public["GET /"+e.Name()] = true
	}
	setup := map[string]bool{"/xiaozhi/ota/": true}
	routes := ts.srv.Routes()
	if len(routes) < 10 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	seen := map[access.Rule]int{}
	for _, rt := range routes {
		seen[rt.Rule]++
		switch rt.Rule {
		case access.Open:
			if !public[rt.Pattern] {
				t.Errorf("%s is Open (no key, no origin check) but not a known public route", rt.Pattern)
			}
		case access.DeviceSetup:
			if !setup[rt.Pattern] {
				t.Errorf("%s is DeviceSetup (no key) but not the OTA check", rt.Pattern)
			}
		case access.Keyed, access.Session, access.Device, access.TokenEndpoint:
		default:
			t.Errorf("%s: unknown rule %v", rt.Pattern, rt.Rule)
		}
		needsKey := rt.Rule != access.Open && rt.Rule != access.DeviceSetup
		for _, c := range []struct {
			name         string
			key, origin  string
			host         string
			status       int
			code         string
			appliesWhere bool
		}{
			{"foreign Host", walkKey, "http://" + foreignHost, foreignHost, http.StatusForbidden, access.CodeHost, true},
			{"foreign Origin", walkKey, "https://evil.example", walkHost, http.StatusForbidden, access.CodeOrigin, rt.Rule != access.Open},
			{"no key", "", "", walkHost, http.StatusUnauthorized, access.CodeUnauthorized, needsKey},
			{"wrong key", "vp-wrong", "", walkHost, http.StatusUnauthorized, access.CodeUnauthorized, needsKey},
			{"the key", walkKey, "http://" + walkHost, walkHost, 0, "", true},
		} {
			r := requestFor(rt.Pattern)
			r.Host = c.host
			if c.key != "" {
				r.Header.Set("Authorization", "Bearer "+c.key)
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			refused := w.Code == http.StatusForbidden || w.Code == http.StatusUnauthorized
			switch {
			case c.status == 0 || !c.appliesWhere:
				if refused {
					t.Errorf("%s (%v) %s: refused %d %s", rt.Pattern, rt.Rule, c.name, w.Code, w.Body)
				}
			case w.Code != c.status || errorCode(w) != c.code:
				t.Errorf("%s (%v) %s: %d %s, want %d %s", rt.Pattern, rt.Rule, c.name, w.Code, strings.TrimSpace(w.Body.String()), c.status, c.code)
			}
		}
	}
	for _, rule := range []access.Rule{access.Open, access.Keyed, access.Session, access.Device, access.DeviceSetup, access.TokenEndpoint} {
		if seen[rule] == 0 {
			t.Errorf("no route walked under %v", rule)
		}
	}
	// Unmatched paths get the mux's 404, behind the Host check still.
	for host, want := range map[string]int{walkHost: http.StatusNotFound, foreignHost: http.StatusForbidden} {
		r := requestFor("GET /no/such/route")
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("an unknown path with Host %s: %d, want %d", host, w.Code, want)
		}
	}
	ts.srv.mux.HandleFunc("GET /sneaky", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	w := httptest.NewRecorder()
	h.ServeHTTP(w, requestFor("GET /sneaky"))
	if w.Code != http.StatusInternalServerError {
		t.Errorf("a route registered without a rule: %d, want 500", w.Code)
	}
}

func dialDevice(url string, hdr http.Header) (int, error) {
	ws, resp, err := websocket.DefaultDialer.Dial(url, hdr)
	status := 0
	if resp != nil {
		status = resp.StatusCode
		_ = resp.Body.Close()
	}
	if ws != nil {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = ws.Close()
	}
	return status, err
}

// Issue 36 item 1: with VOXPIPE_API_KEYS set, the xiaozhi WebSocket took
// a connection with no key from any Origin (101). Now, with keys or a
// device token configured, it needs one of them, and a browser Origin is
// held to the /ws rule. voxpipe_sessions_total counts the device
// sessions (item 5).
func TestXiaozhiNeedsKeyOrDeviceToken(t *testing.T) {
	checkLeaks(t)
	const dev = "/xiaozhi/v1/?device-id=aa:bb:cc:dd:ee:ff"
	for _, c := range []struct {
		name        string
		keys        []string
		token       string
		hdr         http.Header
		wantUpgrade bool
		want        int
	}{
		{"keys, nothing, evil origin", []string{"sekrit"}, "", http.Header{"Origin": {"http://evil.example"}}, false, http.StatusForbidden},
		{"keys, nothing", []string{"sekrit"}, "", nil, false, http.StatusUnauthorized},
		{"keys, wrong key", []string{"sekrit"}, "", http.Header{"Authorization": {"Bearer nope"}}, false, http.StatusUnauthorized},
		{"keys, the key", []string{"sekrit"}, "", http.Header{"Authorization": {"Bearer sekrit"}}, true, 0},
		{"keys, the key, evil origin", []string{"sekrit"}, "", http.Header{"Authorization": {"Bearer sekrit"}, "Origin": {"http://evil.example"}}, false, http.StatusForbidden},
		{"keys and token, the token", []string{"sekrit"}, "tok", http.Header{"Authorization": {"Bearer tok"}}, true, 0},
		{"keys and token, the key", []string{"sekrit"}, "tok", http.Header{"Authorization": {"Bearer sekrit"}}, true, 0},
		{"keys and token, nothing", []string{"sekrit"}, "tok", nil, false, http.StatusUnauthorized},
		{"token, nothing", nil, "tok", nil, false, http.StatusUnauthorized},
		{"token, the token", nil, "tok", http.Header{"Authorization": {"Bearer tok"}}, true, 0},
		{"token, the token, evil origin", nil, "tok", http.Header{"Authorization": {"Bearer tok"}, "Origin": {"http://evil.example"}}, false, http.StatusForbidden},
		{"neither, nothing", nil, "", nil, true, 0},
		{"neither, evil origin", nil, "", http.Header{"Origin": {"http://evil.example"}}, false, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := newTestServer(t, nil, func(cfg *Config) {
				xc := xiaozhi.DefaultConfig()
				xc.Token = c.token
				cfg.Xiaozhi = &xc
				cfg.Access.Keys = c.keys
			})
			url := "ws" + strings.TrimPrefix(ts.http.URL, "http") + dev
			status, err := dialDevice(url, c.hdr)
			if c.wantUpgrade {
				if err != nil {
					t.Fatalf("HTTP %d %v, want 101", status, err)
				}
				// The 101 reaches the client before the handler counts
				// the session, so wait for the count, then for the close.
				deadline := time.Now().Add(5 * time.Second)
				n := metricValue(t, ts.srv.metrics, "voxpipe_sessions_total", "xiaozhi")
				for n == 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
					n = metricValue(t, ts.srv.metrics, "voxpipe_sessions_total", "xiaozhi")
				}
				if n != 1 {
					t.Errorf("voxpipe_sessions_total{xiaozhi} = %v, want 1", n)
				}
				waitIdle(t, ts.srv)
				return
			}
			if err == nil || status != c.want {
				t.Errorf("HTTP %d (%v), want %d", status, err, c.want)
			}
		})
	}
}

// Issue 36 item 2: on a keyless loopback server a page on a name rebound
// to 127.0.0.1 sent Host: evil.example:PORT with a matching Origin and
// read /traces and used /v1 (TestEveryRouteGuarded walks /ws and the
// rest). Its own loopback names still work.
func TestDNSRebindingRefused(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config) {
		c.API = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
		c.Access.CheckHost = true
	})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.http.URL, "http://"))
	// The host limit's series exists from the start, like the others.
	hostRefusals := func() string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.http.URL+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		m := string(body)
		i := strings.Index(m, `voxpipe_limit_rejections_total{limit="host"} `)
		if i < 0 {
			t.Fatal(`/metrics has no voxpipe_limit_rejections_total{limit="host"}`)
		}
		n, _, _ := strings.Cut(m[i+len(`voxpipe_limit_rejections_total{limit="host"} `):], "\n")
		return n
	}
	if n := hostRefusals(); n != "0" {
		t.Errorf("host refusals before any request: %s", n)
	}
	for _, c := range []struct {
		host string
		want int
	}{{"evil.example:" + port, http.StatusForbidden}, {"localhost:" + port, 0}, {"127.0.0.1:" + port, 0}} {
		for _, p := range []string{"GET /traces", "POST /v1/chat/completions", "GET /healthz"} {
			method, path, _ := strings.Cut(p, " ")
			req, _ := http.NewRequestWithContext(t.Context(), method, ts.http.URL+path, strings.NewReader("{}"))
			req.Host = c.host
			req.Header.Set("Origin", "http://"+c.host)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if (c.want != 0 && resp.StatusCode != c.want) || (c.want == 0 && resp.StatusCode == http.StatusForbidden) {
				t.Errorf("%s with Host %s: %d", p, c.host, resp.StatusCode)
			}
		}
	}
	if n := hostRefusals(); n != "3" {
		t.Errorf("host refusals counted: %s, want 3", n)
	}
}

// Found by reading (issue 36): with no write timeout a /v1 client that
// stops reading held its handler and socket for ever. Each write now has
// WriteTimeout, and an answer that streams longer than that is not cut.
func TestWriteDeadlines(t *testing.T) {
	writeErr := make(chan error, 1)
	streamed := make(chan int, 1)
	ts := newTestServer(t, nil, func(c *Config) {
		c.WriteTimeout = 300 * time.Millisecond
		c.API = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			if r.URL.Path == "/v1/stream" { // slow, to a reader: 1.5 s
				n := 0
				for range 8 {
					if _, err := w.Write([]byte("data: token\n\n")); err != nil {
						break
					}
					w.(http.Flusher).Flush()
					n++
					time.Sleep(200 * time.Millisecond)
				}
				streamed <- n
				return
			}
			chunk := make([]byte, 64<<10)
			for { // fast, to a client that reads nothing
				if _, err := w.Write(chunk); err != nil {
					writeErr <- err
					return
				}
			}
		})
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	if _, err := conn.Write([]byte("GET /v1/flood HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-writeErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the stalled write ended with %v, want its deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a handler writing to a client that reads nothing still blocks after 10 s (WriteTimeout 300 ms)")
	}
	resp, err := http.Get(ts.http.URL + "/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 0, 1024)
	buf := make([]byte, 256)
	for {
		n, err := resp.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	_ = resp.Body.Close()
	if n := <-streamed; n != 8 || strings.Count(string(body), "data: token") != 8 {
		t.Errorf("a 1.6 s stream to a reading client: %d writes, %d received, want 8 (not cut at WriteTimeout)", n, strings.Count(string(body), "data: token"))
	}
}

// Found by reading (issue 36): output_sample_rate 11025 passes the start
// check, but 20 ms of it is not whole samples. The session is refused
// (pipeline.Config's rates must be multiples of 50) with bad_format, and
// the connection may go on with a start that works. (22050 and 44100
// make whole 20 ms frames, 441 and 882 samples.)
func TestOddRatesRefused(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	ws := dial(t, ts.url)
	for _, start := range []map[string]any{
		{"type": "start", "sample_rate": 16000, "output_sample_rate": 11025},
		{"type": "start", "sample_rate": 11025},
	} {
		sendJSON(t, ws, start)
		if ev := nextEvent(t, ws); ev.Type != "error" || ev.Code != "bad_format" {
			t.Errorf("%v: %+v, want bad_format", start, ev)
		}
	}
	sendJSON(t, ws, startMsg(16000, ""))
	expectReady(t, ws)
	stopAndExpectClose(t, ws)
	waitIdle(t, ts.srv)
}
