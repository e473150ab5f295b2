package mcp

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParse(t *testing.T) {
	t.Setenv("VOXPIPE_MCP_TEST_TOKEN", "s3cret")
	cfg, err := Parse([]byte(`{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "server-fs", "${HOME_DIR:-/srv}"], "env": {"TOKEN": "${VOXPIPE_MCP_TEST_TOKEN}", "RE": "a$b"}},
		"search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${VOXPIPE_MCP_TEST_TOKEN}"}},
		"typed": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
		"off": {"command": "nothing-here", "disabled": true}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ServerConfig{
		"files": {Type: "stdio", Command: "npx", Args: []string{"-y", "server-fs", "/srv"},
			Env: map[string]string{"TOKEN": "s3cret", "RE": "a$b"}},
		"search": {Type: "http", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		"typed":  {Type: "http", URL: "http://127.0.0.1:9/mcp"},
		"off":    {Type: "stdio", Command: "nothing-here", Disabled: true},
	}
	if !reflect.DeepEqual(cfg.Servers, want) {
		t.Errorf("have %+v\nwant %+v", cfg.Servers, want)
	}
	if got := cfg.enabled(); !reflect.DeepEqual(got, []string{"files", "search", "typed"}) {
		t.Errorf("enabled: have %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not json", `{`, "not a JSON object"},
		{"no servers", `{}`, `no "mcpServers"`},
		{"top-level typo", `{"mcpServers": {}, "mcpServer": {}}`, `unknown top-level field "mcpServer"`},
		{"servers not object", `{"mcpServers": []}`, `"mcpServers" is not an object`},
		{"server not object", `{"mcpServers": {"a": "npx"}}`, `server "a": not an object`},
		{"unknown field", `{"mcpServers": {"a": {"comand": "x"}}}`, `server "a": unknown field "comand"`},
		{"wrong type of field", `{"mcpServers": {"a": {"command": "x", "args": "y"}}}`, `server "a": json: cannot unmarshal`},
		{"neither", `{"mcpServers": {"a": {}}}`, `server "a": neither "command" nor "url"`},
		{"both", `{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}`, `server "a": both "command" and "url"`},
		{"bad scheme", `{"mcpServers": {"a": {"url": "ftp://h/"}}}`, `server "a": url "ftp://h/": want an http`},
		{"no host", `{"mcpServers": {"a": {"url": "http:///x"}}}`, `want an http`},
		{"sse", `{"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}}`, `server "a": type "sse"`},
		{"unknown type", `{"mcpServers": {"a": {"type": "ws", "url": "http://h/"}}}`, `server "a": unknown type "ws"`},
		{"stdio without command", `{"mcpServers": {"a": {"type": "stdio", "url": "http://h/"}}}`, `needs "command"`},
		{"headers on a command", `{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}`, `"url" and "headers" are for HTTP`},
		{"env on http", `{"mcpServers": {"a": {"url": "http://h/", "env": {"A": "b"}}}}`, `are for commands`},
		{"unset variable", `{"mcpServers": {"a": {"url": "http://h/", "headers": {"X": "${VOXPIPE_MCP_UNSET_VAR}"}}}}`, `server "a": header X: environment variable VOXPIPE_MCP_UNSET_VAR is not set`},
		{"unclosed reference", `{"mcpServers": {"a": {"command": "${X"}}}`, `unclosed ${`},
		{"empty name", `{"mcpServers": {" ": {"command": "x"}}}`, `empty name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("have %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: have %v", err)
	}
	path := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"url": "http://h/", "bogus": 1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Errorf("bad file: have %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"url": "http://h/"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil || cfg.Servers["a"].URL != "http://h/" {
		t.Errorf("good file: have %+v, %v", cfg, err)
	}
}

func TestSanitizeAndUnique(t *testing.T) {
	for in, want := range map[string]string{
		"echo":                          "echo",
		"self.audio_speaker.set_volume": "self_audio_speaker_set_volume",
		"a b/c":                         "a_b_c",
		"":                              "tool",
		"é":                             "__",
		strings.Repeat("x", 70):         strings.Repeat("x", 64),
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	taken := map[string]bool{}
	long := strings.Repeat("y", 64)
	for _, want := range []string{"a", "a_2", "a_3"} {
		if got := unique("a", taken); got != want {
			t.Errorf("unique: have %q, want %q", got, want)
		}
	}
	unique(long, taken)
	if got := unique(long, taken); got != strings.Repeat("y", 62)+"_2" {
		t.Errorf("unique of a 64-byte name: have %q", got)
	}
}

func TestClip(t *testing.T) {
	if got := clip("short", 5, 100); got != "short" {
		t.Errorf("have %q", got)
	}
	s := strings.Repeat("é", 100) // 200 bytes
	got := clip(s, len(s), 64)
	if len(got) > 64 || !strings.HasSuffix(got, "[truncated: the result was 200 bytes]") {
		t.Errorf("have %q (%d bytes)", got, len(got))
	}
	if !strings.HasPrefix(got, "éé") || !utf8.ValidString(got) {
		t.Errorf("cut inside a rune: %q", got)
	}
}
