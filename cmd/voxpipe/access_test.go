package main

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/web/access"
)

func TestPublicBindNeedsKeys(t *testing.T) {
	t.Setenv("VOXPIPE_TEST_KEYS", "")
	for _, c := range []struct {
		addr, keys string
		insecure   bool
		wantErr    bool
	}{
		{"127.0.0.1:8080", "", false, false},
		{"[::1]:8080", "", false, false},
		{"localhost:8080", "", false, false},
		{"0.0.0.0:8080", "", false, true},
		{":8080", "", false, true},
		{"192.0.2.1:8080", " , ", false, true},
		{"0.0.0.0:8080", "", true, false},
		{"0.0.0.0:8080", "k1,k2", false, false},
	} {
		cfg := config.Default()
		cfg.Server.Addr = c.addr
		cfg.Server.AllowInsecurePublic = c.insecure
		cfg.Server.Auth.APIKeysEnv = "VOXPIPE_TEST_KEYS"
		t.Setenv("VOXPIPE_TEST_KEYS", c.keys)
		ac, err := accessConfig(&cfg, zerolog.Nop())
		if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, errInsecurePublic)) {
			t.Errorf("%s keys %q insecure %v: %v", c.addr, c.keys, c.insecure, err)
		}
		if c.keys == "k1,k2" && len(ac.Keys) != 2 {
			t.Errorf("keys %v", ac.Keys)
		}
	}
}

// Issue 36 item 2: the Host check follows server.addr, the keys and
// server.allowed_hosts; a loopback server refuses a rebound name.
func TestHostCheckFollowsAddr(t *testing.T) {
	for _, c := range []struct {
		addr, keys string
		allowed    []string
		host       string
		want       bool
	}{
		{"127.0.0.1:8080", "", nil, "evil.example:8080", false},
		{"127.0.0.1:8080", "k1", nil, "evil.example:8080", false},
		{"127.0.0.1:8080", "", nil, "localhost:8080", true},
		{"127.0.0.1:8080", "", nil, "192.168.1.5:8080", false},
		{"127.0.0.1:8080", "", []string{"voice.lan"}, "voice.lan:8080", true},
		{"0.0.0.0:8080", "", nil, "192.168.1.5:8080", true}, // insecure public: IP literals
		{"0.0.0.0:8080", "", nil, "evil.example:8080", false},
		{"0.0.0.0:8080", "k1", nil, "voice.example.com", true}, // keyed: Host not checked
		{"0.0.0.0:8080", "k1", []string{"voice.example.com"}, "other.example", false},
		{"0.0.0.0:8080", "k1", []string{"voice.example.com"}, "voice.example.com", true},
		{"0.0.0.0:8080", "k1", []string{"voice.example.com"}, "192.168.1.5", true},
	} {
		cfg := config.Default()
		cfg.Server.Addr = c.addr
		cfg.Server.AllowInsecurePublic = true
		cfg.Server.AllowedHosts = c.allowed
		cfg.Server.Auth.APIKeysEnv = "VOXPIPE_TEST_KEYS"
		t.Setenv("VOXPIPE_TEST_KEYS", c.keys)
		ac, err := accessConfig(&cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/healthz", nil)
		r.Host = c.host
		if got := access.New(ac).HostOK(r); got != c.want {
			t.Errorf("addr %s keys %q allowed %v: Host %s served %v, want %v", c.addr, c.keys, c.allowed, c.host, got, c.want)
		}
	}
}

// With API keys set, a xiaozhi device can only send the device token: a
// server with keys and no server.xiaozhi.token refuses every device, and
// says so at start-up.
func TestXiaozhiTokenWarning(t *testing.T) {
	for _, c := range []struct {
		keys, token string
		warn        bool
	}{{"k1", "", true}, {"k1", "dev-token", false}, {"", "", false}} {
		cfg := config.Default()
		cfg.Server.Auth.APIKeysEnv = "VOXPIPE_TEST_KEYS"
		cfg.Server.Xiaozhi.Token = c.token
		t.Setenv("VOXPIPE_TEST_KEYS", c.keys)
		var logs strings.Builder
		if _, err := accessConfig(&cfg, zerolog.New(&logs)); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "server.xiaozhi.token"); got != c.warn {
			t.Errorf("keys %q, token %q: warning %v, want %v; log %s", c.keys, c.token, got, c.warn, logs.String())
		}
		if strings.Contains(logs.String(), "k1") || (c.token != "" && strings.Contains(logs.String(), c.token)) {
			t.Errorf("a secret in the log: %s", logs.String())
		}
	}
}
