package main

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
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
