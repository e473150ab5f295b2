package lkagent

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/pipeline"
)

func fakeBackends() pipeline.Backends {
	return pipeline.Backends{ASR: sessiontest.ASR{Text: "hello"}, LLM: sessiontest.LLM{Answer: "hi"}, TTS: sessiontest.TTS{}}
}

func TestControlURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ws://127.0.0.1:7880", "ws://127.0.0.1:7880/agent?protocol=1"},
		{"http://lk.example:7880/", "ws://lk.example:7880/agent?protocol=1"},
		{"https://lk.example", "wss://lk.example/agent?protocol=1"},
		{"wss://lk.example/base", "wss://lk.example/base/agent?protocol=1"},
	} {
		got, err := controlURL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("controlURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"lk.example:7880", "ftp://lk.example", "ws://", "::"} {
		if _, err := controlURL(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("controlURL(%q): err %v, want ErrConfig", bad, err)
		}
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	base := Config{URL: "ws://127.0.0.1:7880", APIKey: "k", APISecret: "s"}
	for name, edit := range map[string]func(*Config){
		"no url":           func(c *Config) { c.URL = "" },
		"no key":           func(c *Config) { c.APIKey = "" },
		"no secret":        func(c *Config) { c.APISecret = "" },
		"negative max":     func(c *Config) { c.MaxJobs = -1 },
		"url without host": func(c *Config) { c.URL = "ws:///agent" },
	} {
		cfg := base
		edit(&cfg)
		if _, err := New(cfg, fakeBackends(), zerolog.Nop()); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(base, pipeline.Backends{}, zerolog.Nop()); !errors.Is(err, ErrConfig) {
		t.Errorf("no backends: err %v, want ErrConfig", err)
	}
}

// TestHealthSaysDraining: /healthz is 200 ok while jobs are taken, 503
// draining once the drain has begun (the load balancer's and the
// orchestrator's signal).
func TestHealthSaysDraining(t *testing.T) {
	w, err := New(Config{URL: "ws://127.0.0.1:7880", APIKey: "k", APISecret: "s", MaxJobs: 3}, fakeBackends(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	check := func(wantCode int, wantStatus string) {
		t.Helper()
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body struct {
			Status  string `json:"status"`
			MaxJobs int    `json:"max_jobs"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
		if rec.Code != wantCode || body.Status != wantStatus || body.MaxJobs != 3 {
			t.Errorf("healthz %d %+v, want %d %q with max_jobs 3", rec.Code, body, wantCode, wantStatus)
		}
	}
	check(http.StatusOK, "ok")
	w.drain() // no jobs: returns at once
	check(http.StatusServiceUnavailable, "draining")
}

func TestOpusSamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkt  []byte
		want int
	}{
		{"empty", nil, 0},
		{"CELT FB 20 ms, one frame (code 0)", []byte{31 << 3, 0xaa}, 960},
		{"CELT FB 10 ms, two frames", []byte{30<<3 | 1, 0xaa}, 960},
		{"SILK WB 60 ms", []byte{11 << 3}, 2880},
		{"hybrid FB 20 ms, code 3 with 3 frames", []byte{15<<3 | 3, 3}, 2880},
		{"code 3 without its count byte", []byte{15<<3 | 3}, 0},
		{"CELT 2.5 ms", []byte{16 << 3}, 120},
	} {
		if got := opusSamples(tc.pkt); got != tc.want {
			t.Errorf("%s: opusSamples(% x) = %d, want %d", tc.name, tc.pkt, got, tc.want)
		}
	}
}
