package config

import (
	"strings"
	"testing"
)

// server.allowed_hosts (issue 36, DNS rebinding) is a known key with a
// checked value, and server.admin_addr (pprof, no auth) must be loopback.
func TestAllowedHostsAndAdminLoopback(t *testing.T) {
	c, err := Parse([]byte("server:\n  allowed_hosts: [voice.lan, \"box.example:8443\"]\n  admin_addr: \"[::1]:6060\"\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if h := c.Server.AllowedHosts; len(h) != 2 || h[1] != "box.example:8443" {
		t.Errorf("allowed_hosts %q", h)
	}
	for _, addr := range []string{"127.0.0.1:6060", "localhost:6060", "127.0.0.2:0"} {
		c, _ := Parse(nil, "f.yaml")
		if err := c.Set("server.admin_addr", addr, "flag"); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("admin_addr %s: %v", addr, err)
		}
	}
	for _, bad := range []struct{ yaml, key string }{
		{"server:\n  admin_addr: 0.0.0.0:6060\n", "server.admin_addr"},
		{"server:\n  admin_addr: \":6060\"\n", "server.admin_addr"},
		{"server:\n  admin_addr: 192.0.2.1:6060\n", "server.admin_addr"},
		{"server:\n  allowed_hosts: [\"http://voice.lan\"]\n", "server.allowed_hosts[0]"},
		{"server:\n  allowed_hosts: [\"\"]\n", "server.allowed_hosts[0]"},
	} {
		c, err := Parse([]byte(bad.yaml), "f.yaml")
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), bad.key) {
			t.Errorf("%q: %v, want an error naming %s", bad.yaml, err, bad.key)
		}
	}
}
