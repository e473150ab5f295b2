package config

import (
	"errors"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate(): %v", err)
	}
}

// The shipped default.yaml must load cleanly and say the same as Default(),
// so the comments there document the built-in behaviour.
func TestDefaultYAMLMatchesDefault(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(t), "configs", "default.yaml")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Default()
	// Paths left empty in Default() mean "the backend's default": the file
	// spells them out.
	c.ASR.Sphinx.ModelDir, c.ASR.Sphinx.Dict, c.ASR.Sphinx.LM = "", "", ""
	c.origins = nil
	if !reflect.DeepEqual(*c, want) {
		t.Fatalf("configs/default.yaml differs from Default():\nhave %+v\nwant %+v", *c, want)
	}
}

func TestUnknownFieldNamesFileLineAndSection(t *testing.T) {
	doc := `
server:
  addr: 127.0.0.1:9000
pipeline:
  max_tokens: 64
  vad_silnce: 300
`
	_, err := Parse([]byte(doc), "configs/x.yaml")
	if !errors.Is(err, ErrUnknownField) {
		t.Fatalf("have %v, want ErrUnknownField", err)
	}
	want := `configs/x.yaml: line 6: field "vad_silnce" not found in "pipeline"`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("have %q, want it to contain %q", err, want)
	}
}

func TestUnknownFieldsAllReported(t *testing.T) {
	doc := "servr:\n  addr: x\npipeline:\n  vad:\n    start: 3\n"
	_, err := Parse([]byte(doc), "f.yaml")
	for _, want := range []string{
		`f.yaml: line 1: field "servr" not found in "top level"`,
		`f.yaml: line 5: field "start" not found in "pipeline.vad" (known: detector, end_silence_ms, pre_roll_ms, speech_prob, start_ms, threshold_db)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("have %v, want it to contain %q", err, want)
		}
	}
}

func TestBadTypeNamesKey(t *testing.T) {
	doc := "pipeline:\n  max_tokens: lots\n  playback_report_timeout: soon\n"
	_, err := Parse([]byte(doc), "f.yaml")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("have %v, want ErrInvalid", err)
	}
	for _, want := range []string{"f.yaml: line 2: pipeline.max_tokens:", "f.yaml: line 3: pipeline.playback_report_timeout:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("have %q, want it to contain %q", err, want)
		}
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := Parse([]byte("server: [\n"), "f.yaml")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "f.yaml") {
		t.Fatalf("have %v, want ErrInvalid naming f.yaml", err)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	c, err := Parse(nil, "empty.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Addr != Default().Server.Addr {
		t.Fatalf("have %q", c.Server.Addr)
	}
}

func TestFileOverridesDefaults(t *testing.T) {
	doc := "server:\n  idle_timeout: 90s\npipeline:\n  vad:\n    end_silence_ms: 400\ntts:\n  backend: espeak\n"
	c, err := Parse([]byte(doc), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.IdleTimeout != 90*time.Second || c.Pipeline.VAD.EndSilenceMs != 400 || c.TTS.Backend != "espeak" {
		t.Fatalf("have %+v", c)
	}
	if c.Pipeline.VAD.StartMs != 100 || c.Server.MaxSessions != 16 {
		t.Fatalf("defaults lost: %+v", c)
	}
}

func TestValidateNamesKeyAndOrigin(t *testing.T) {
	doc := "pipeline:\n  vad:\n    end_silence_ms: 20\n"
	c, err := Parse([]byte(doc), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("server.max_sessions", "0", "flag --set"); err != nil {
		t.Fatal(err)
	}
	c.TTS.Espeak.Rate = 9000
	err = c.Validate()
	for _, want := range []string{
		"f.yaml: line 3: pipeline.vad.end_silence_ms: must be 100..10000 (got 20)",
		"flag --set: server.max_sessions: must be 1..100000 (got 0)",
		"default: tts.espeak.rate: must be 80..450 (got 9000)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("have %v, want it to contain %q", err, want)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("have %v, want ErrInvalid", err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		key, value, want string
	}{
		{"server.addr", "nohostport", "server.addr"},
		{"server.addr", "127.0.0.1:99999", "port"},
		{"log.level", "loud", "log.level"},
		{"log.format", "xml", "log.format"},
		{"llm.engine.chat_template", "alpaca", "llm.engine.chat_template"},
		{"llm.engine.top_p", "1.5", "llm.engine.top_p"},
		{"pipeline.temperature", ".nan", "pipeline.temperature"},
		{"asr.sphinx.jsgf", "/tmp/g.jsgf", "at most one of lm, jsgf and keywords"},
		{"tts.backend", `""`, "tts.backend: must not be empty"},
		{"pipeline.early_start", "sometimes", "pipeline.early_start"},
		{"pipeline.early_start_stable_ms", "-5", "pipeline.early_start_stable_ms"},
		{"pipeline.turn.pause_final_ms", "-1", "pipeline.turn.pause_final_ms"},
		{"pipeline.turn.remember_voices", "5000", "pipeline.turn.remember_voices"},
		{"tools.builtin", "[time, weather]", "tools.builtin[1]"},
		{"tools.time_zone", "Mars/Olympus", "tools.time_zone"},
		{"tools.call_timeout", "1ms", "tools.call_timeout"},
		{"tools.max_rounds", "0", "tools.max_rounds"},
		{"tools.mcp_allow", "{fs: [read]}", "tools.mcp_allow.fs"},
		{"server.xiaozhi.mcp_timeout", "0s", "server.xiaozhi.mcp_timeout"},
		{"server.xiaozhi.mcp_list_wait", "2m", "server.xiaozhi.mcp_list_wait"},
		{"server.xiaozhi.vision_url", "ftp://cam.example/upload", "server.xiaozhi.vision_url"},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			c := Default()
			if tc.key == "asr.sphinx.jsgf" {
				c.ASR.Sphinx.LM = "/x.lm.bin"
			}
			if err := c.Set(tc.key, tc.value, "test"); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("have %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSet(t *testing.T) {
	c := Default()
	if err := c.Set("pipeline.playback_report_timeout", "250ms", "flag"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("server.addr", "0.0.0.0:9999", "flag --addr"); err != nil {
		t.Fatal(err)
	}
	if c.Pipeline.PlaybackReportTimeout != 250*time.Millisecond || c.Server.Addr != "0.0.0.0:9999" {
		t.Fatalf("have %+v", c)
	}
	if c.Origin("server.addr") != "flag --addr" || c.Origin("log.level") != "default" {
		t.Fatalf("origins %v", c.origins)
	}
	if err := c.Set("pipeline.vad.nope", "1", "flag"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("have %v, want ErrNoKey", err)
	}
	if err := c.Set("pipeline.vad", "1", "flag"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("section: have %v, want ErrNoKey", err)
	}
	if err := c.Set("pipeline.max_tokens", "many", "flag"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad value: have %v, want ErrInvalid", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("server:\n  addr: 127.0.0.1:1\n"))
	f.Add([]byte("pipeline:\n  vad: {start_ms: 3}\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err == nil {
			_ = c.Validate()
		}
	})
}

// on and off were booleans in YAML 1.1; early_start must read them as words,
// from a file and from --set.
func TestEarlyStartWords(t *testing.T) {
	for _, mode := range []string{EarlyStartOn, EarlyStartOff, EarlyStartAuto} {
		c, err := Parse([]byte("pipeline:\n  early_start: "+mode+"\n"), "f.yaml")
		if err != nil {
			t.Errorf("file: early_start %q: %v", mode, err)
		} else if c.Pipeline.EarlyStart != mode {
			t.Errorf("file: early_start %q: have %q", mode, c.Pipeline.EarlyStart)
		}
		d := Default()
		if err := d.Set("pipeline.early_start", mode, "flag"); err != nil || d.Pipeline.EarlyStart != mode {
			t.Errorf("--set early_start=%s: have %q, %v", mode, d.Pipeline.EarlyStart, err)
		}
	}
}

func TestMaxSessionsAutoAndAdmission(t *testing.T) {
	c, err := Parse([]byte("server:\n  max_sessions: auto\n  admission:\n    max_v2v_ms: 1500\n  admin_addr: 127.0.0.1:6060\ntelemetry:\n  otlp_endpoint: http://127.0.0.1:4318\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Server.MaxSessions != SessionsAuto || c.Server.Admission.MaxV2VMs != 1500 || c.Server.Admission.TargetUtilization != 0.8 {
		t.Errorf("have %+v", c.Server)
	}
	if err := c.Set("server.max_sessions", "8", "flag"); err != nil || c.Server.MaxSessions != 8 {
		t.Errorf("set 8: %v, %v", err, c.Server.MaxSessions)
	}
	for key, value := range map[string]string{
		"server.max_sessions": "many", "server.admission.target_utilization": "2",
		"server.admin_addr": "6060", "telemetry.otlp_endpoint": "grpc://x:4317",
	} {
		c, _ := Parse(nil, "f.yaml")
		err := c.Set(key, value, "flag")
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%s: have %v, want an error naming the key", key, value, err)
		}
	}
}
