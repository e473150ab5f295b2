package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
)

// Config is the ecosystem's usual MCP configuration file (the shape Claude
// Desktop, Cursor and most MCP clients read):
//
//	{"mcpServers": {
//	    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
//	              "env": {"DEBUG": "1"}},
//	    "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}}
//	}}
type Config struct {
	// Servers by name, as in the file; disabled ones included.
	Servers map[string]ServerConfig
}

// ServerConfig is one entry of "mcpServers": a command run over stdio, or
// a streamable HTTP endpoint.
type ServerConfig struct {
	// Type is "stdio" or "http" ("streamable-http", "streamableHttp" are
	// read as "http"); the file may leave it out, then it follows from
	// which of Command and URL is set.
	Type string `json:"type,omitempty"`

	// Command runs the server with Args, in Cwd (voxpipe's own directory
	// when empty), with voxpipe's environment plus Env.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`

	// URL is a streamable HTTP endpoint; Headers go with every request
	// (typically Authorization).
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// Disabled servers are kept in the file but not started.
	Disabled bool `json:"disabled,omitempty"`
}

// serverFields are the keys a server entry may have; anything else is a
// typo or a feature voxpipe does not have, and either way the operator
// should hear about it rather than have it ignored.
var serverFields = []string{"type", "command", "args", "env", "cwd", "url", "headers", "disabled"}

// Load reads and checks the file at path. ${VAR} (and ${VAR:-default}) in
// command, args, cwd, env values, url and headers are replaced from
// voxpipe's environment, so secrets need not be written into the file.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the operator names the file in voxpipe's config
	if err != nil {
		return Config{}, fmt.Errorf("mcp: config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("mcp: config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse reads a configuration file's contents (see Load).
func Parse(data []byte) (Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return Config{}, fmt.Errorf("not a JSON object: %w", err)
	}
	for k := range top {
		if k != "mcpServers" {
			return Config{}, fmt.Errorf("unknown top-level field %q (the file has one, \"mcpServers\")", k)
		}
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return Config{}, errors.New(`no "mcpServers" object`)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return Config{}, fmt.Errorf(`"mcpServers" is not an object of servers: %w`, err)
	}
	cfg := Config{Servers: make(map[string]ServerConfig, len(entries))}
	// Sorted so that the first error reported is the same on every run.
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sc, err := parseServer(name, entries[name])
		if err != nil {
			return Config{}, err
		}
		cfg.Servers[name] = sc
	}
	return cfg, nil
}

func parseServer(name string, raw json.RawMessage) (ServerConfig, error) {
	if strings.TrimSpace(name) == "" {
		return ServerConfig{}, errors.New("a server has an empty name")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return ServerConfig{}, fmt.Errorf("server %q: not an object: %w", name, err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(serverFields, k) {
			return ServerConfig{}, fmt.Errorf("server %q: unknown field %q (known: %s)", name, k, strings.Join(serverFields, ", "))
		}
	}
	var sc ServerConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return ServerConfig{}, fmt.Errorf("server %q: %w", name, err)
	}
	if err := sc.expand(); err != nil {
		return ServerConfig{}, fmt.Errorf("server %q: %w", name, err)
	}
	if err := sc.check(); err != nil {
		return ServerConfig{}, fmt.Errorf("server %q: %w", name, err)
	}
	return sc, nil
}

// check normalises Type and rejects entries that cannot be started.
func (sc *ServerConfig) check() error {
	switch sc.Type {
	case "":
		switch {
		case sc.Command != "" && sc.URL != "":
			return errors.New(`both "command" and "url": a server is either a command or an endpoint`)
		case sc.Command != "":
			sc.Type = "stdio"
		case sc.URL != "":
			sc.Type = "http"
		default:
			return errors.New(`neither "command" nor "url"`)
		}
	case "stdio":
	case "http", "streamable-http", "streamableHttp", "streamable_http":
		sc.Type = "http"
	case "sse":
		return errors.New(`type "sse" (the old HTTP+SSE transport) is not supported; use the server's streamable HTTP endpoint`)
	default:
		return fmt.Errorf(`unknown type %q (want "stdio" or "http")`, sc.Type)
	}
	switch sc.Type {
	case "stdio":
		if sc.Command == "" {
			return errors.New(`type "stdio" needs "command"`)
		}
		if sc.URL != "" || len(sc.Headers) > 0 {
			return errors.New(`"url" and "headers" are for HTTP servers, not a command`)
		}
	case "http":
		if sc.URL == "" {
			return errors.New(`type "http" needs "url"`)
		}
		if sc.Command != "" || len(sc.Args) > 0 || len(sc.Env) > 0 || sc.Cwd != "" {
			return errors.New(`"command", "args", "env" and "cwd" are for commands, not an HTTP server`)
		}
		u, err := url.Parse(sc.URL)
		if err != nil {
			return fmt.Errorf("url: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q: want an http:// or https:// address", sc.URL)
		}
	}
	return nil
}

// expand replaces ${VAR} references from the environment.
func (sc *ServerConfig) expand() error {
	var err error
	ex := func(field, s string) string {
		if err != nil {
			return s
		}
		var out string
		out, err = expandEnv(s)
		if err != nil {
			err = fmt.Errorf("%s: %w", field, err)
		}
		return out
	}
	sc.Command = ex("command", sc.Command)
	for i := range sc.Args {
		sc.Args[i] = ex("args", sc.Args[i])
	}
	sc.Cwd = ex("cwd", sc.Cwd)
	for k, v := range sc.Env {
		sc.Env[k] = ex("env "+k, v)
	}
	sc.URL = ex("url", sc.URL)
	for k, v := range sc.Headers {
		sc.Headers[k] = ex("header "+k, v)
	}
	return err
}

// expandEnv replaces ${NAME} and ${NAME:-default}. A bare $ is left alone
// (arguments such as regular expressions use it); an unset variable
// without a default is an error, since an empty token fails later and
// less clearly.
func expandEnv(s string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s)
		}
		b.WriteString(s[:i])
		ref := s[i+2 : i+j]
		name, def, hasDef := strings.Cut(ref, ":-")
		if name == "" {
			return "", errors.New("empty ${} reference")
		}
		v, ok := os.LookupEnv(name)
		switch {
		case ok && v != "":
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		case ok:
		default:
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		s = s[i+j+1:]
	}
}

// enabled are the names of the servers to start, sorted.
func (c Config) enabled() []string {
	var names []string
	for name, sc := range c.Servers {
		if !sc.Disabled {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
