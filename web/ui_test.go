package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUIServed checks the embedded page and its assets are served next to
// the /v1/ API mount.
func TestUIServed(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(cfg *Config) { cfg.API = http.NotFoundHandler() })
	for _, tc := range []struct{ path, contentType, contains string }{
		{"/", "text/html", `src="app.js"`},
		{"/app.js", "javascript", "/rtc/offer"},
		{"/style.css", "text/css", "#overlay"},
	} {
		resp, err := http.Get(ts.http.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), tc.contentType) ||
			!strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: HTTP %d %q, %d bytes; want 200 %s containing %q",
				tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), tc.contentType, tc.contains)
		}
	}
	resp, err := http.Get(ts.http.URL + "/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope.js: HTTP %d, want 404", resp.StatusCode)
	}
}
