package main

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/web"
	"github.com/voxpipe/voxpipe/web/access"
)

// errInsecurePublic refuses a public listener without API keys.
var errInsecurePublic = errors.New("refusing to serve a public address without API keys")

// accessConfig reads the API keys from the environment variable
// server.auth.api_keys_env names and checks the listen address: with no
// keys only a loopback address is served, unless
// server.allow_insecure_public is set. The keys are never logged.
func accessConfig(cfg *config.Config, log zerolog.Logger) (access.Config, error) {
	s := cfg.Server
	var keys []string
	if s.Auth.APIKeysEnv != "" {
		keys = access.ParseKeys(os.Getenv(s.Auth.APIKeysEnv))
	}
	if len(keys) == 0 && !s.AllowInsecurePublic && !isLoopback(s.Addr) {
		return access.Config{}, fmt.Errorf("%w: server.addr %s (from %s) is not a loopback address and $%s holds no keys; set it to comma-separated keys, or set server.allow_insecure_public: true",
			errInsecurePublic, s.Addr, cfg.Origin("server.addr"), s.Auth.APIKeysEnv)
	}
	if len(keys) > 0 {
		log.Info().Int("keys", len(keys)).Str("from", "$"+s.Auth.APIKeysEnv).Msg("auth on: /ws, /rtc/offer, /rtc/config, /traces and /v1 need an API key or session token; the xiaozhi WebSocket a key or the device token")
		if s.Xiaozhi.Enabled && s.Xiaozhi.Token == "" {
			// A speaker sends only the token its OTA check handed out.
			log.Warn().Msg("xiaozhi devices will be refused (401): with API keys set a device needs server.xiaozhi.token, as it cannot send a key")
		}
	} else if !isLoopback(s.Addr) {
		log.Warn().Str("addr", s.Addr).Msg("auth off on a public address (server.allow_insecure_public)")
	}
	// Against DNS rebinding (docs/security.md): a loopback server answers
	// only to loopback names and server.allowed_hosts; a keyless one on a
	// LAN address to IP literals too (a rebinding page can only send a
	// name); a keyed public one, where a rebound page gains nothing
	// without the key, checks Host only when allowed_hosts is set.
	loopback := isLoopback(s.Addr)
	return access.Config{
		CheckHost:         loopback || len(keys) == 0 || len(s.AllowedHosts) > 0,
		AllowIPHosts:      !loopback,
		AllowedHosts:      s.AllowedHosts,
		Keys:              keys,
		TokenTTL:          s.Auth.TokenTTL,
		AllowedOrigins:    s.AllowedOrigins,
		SessionsPerMinute: s.Limits.SessionsPerMinute,
	}, nil
}

// isLoopback says whether host:port listens on loopback only ("" and
// 0.0.0.0 are every interface).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiRejections maps a /v1 refusal's parameter onto the limit counted.
func apiRejections(ws **web.Server) func(param string) {
	names := map[string]string{ //nolint:gosec // G101: metric label names, not credentials
		"messages": "api_messages", "stop": "api_stop", "max_tokens": "api_max_tokens", "max_completion_tokens": "api_max_tokens", "body": "api_body"}
	return func(param string) {
		if n, ok := names[param]; ok && *ws != nil {
			(*ws).LimitRejected(n)
		}
	}
}
