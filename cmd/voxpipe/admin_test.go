package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/web/access"
)

// TestAdminHostCheck: the admin listener answers /debug/pprof/ to loopback
// Host names and server.allowed_hosts, and refuses a rebound name (DNS
// rebinding: a page on evil.example resolved to 127.0.0.1) with 403,
// counted as the host limit.
func TestAdminHostCheck(t *testing.T) {
	var refused []string
	srv, err := startAdmin("127.0.0.1:0", []string{"voxbox.lan"}, func(l string) { refused = append(refused, l) }, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	addr := srv.Addr
	get := func(host string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/debug/pprof/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, host := range []string{addr, "localhost:6060", "voxbox.lan:6060"} {
		if code, _ := get(host); code != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, code)
		}
	}
	code, body := get("evil.example:6060")
	if code != http.StatusForbidden || !strings.Contains(body, access.CodeHost) {
		t.Errorf("Host evil.example: %d %s, want 403 %s", code, body, access.CodeHost)
	}
	if len(refused) != 1 || refused[0] != access.RejectHost {
		t.Errorf("refusals counted %q, want one %q", refused, access.RejectHost)
	}
}
