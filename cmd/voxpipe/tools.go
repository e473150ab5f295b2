package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tools"
	"github.com/voxpipe/voxpipe/tools/clock"
	toolmcp "github.com/voxpipe/voxpipe/tools/mcp"
	"github.com/voxpipe/voxpipe/tools/timer"
)

// openTools gives be the tool providers of c (built-ins first: their names
// win over an MCP server's) and the registry that keeps a conversation,
// and its timers, across a device's reconnections.
func openTools(c *config.Config, be *pipeline.Backends, log zerolog.Logger) ([]io.Closer, error) {
	t := c.Tools
	if !t.Enabled {
		return nil, nil
	}
	loc, err := toolsLocation(t.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("%s: tools.time_zone: %w", c.Origin("tools.time_zone"), err)
	}
	var builtin tools.Static
	for _, name := range t.Builtin {
		switch name {
		case "time":
			builtin = append(builtin, clock.New(loc))
		case "timers":
			builtin = append(builtin, timer.Tools(nil)...)
		}
	}
	if len(builtin) > 0 {
		be.Tools = append(be.Tools, builtin)
	}
	var closers []io.Closer
	if t.MCPConfig != "" {
		mcfg, err := toolmcp.Load(t.MCPConfig)
		if err != nil {
			return nil, fmt.Errorf("%s: tools.mcp_config: %w", c.Origin("tools.mcp_config"), err)
		}
		// The timeout bounds only the wait for the servers' first connects;
		// a server not up by then keeps trying in the background.
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		mgr, err := toolmcp.Start(sctx, mcfg, toolmcp.Options{
			Allow: t.MCPAllow, CallTimeout: t.CallTimeout, MaxOutputBytes: t.MaxResultBytes,
		}, log.With().Str("component", "mcp").Logger())
		cancel()
		if err != nil {
			return nil, fmt.Errorf("tools.mcp_config %s: %w", t.MCPConfig, err)
		}
		be.Tools = append(be.Tools, mgr)
		closers = append(closers, mgr)
	}
	be.Conversations = tools.NewConversations(t.NoticeHold, loc, log.With().Str("component", "tools").Logger())
	closers = append(closers, closerFunc(func() error { be.Conversations.Close(); return nil }))
	return closers, nil
}

func toolsLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.Local, nil
	}
	return time.LoadLocation(name)
}

// toolsConfig maps the tools section onto a session's bounds.
func toolsConfig(c *config.Config) pipeline.ToolsConfig {
	t := c.Tools
	return pipeline.ToolsConfig{
		MaxRounds:      t.MaxRounds,
		Limits:         tools.Limits{CallTimeout: t.CallTimeout, MaxResultBytes: t.MaxResultBytes},
		FillerAfter:    t.FillerAfter,
		FillerEvery:    t.FillerEvery,
		Fillers:        t.Fillers,
		RoundsLimitSay: t.RoundsLimitSay,
	}
}
