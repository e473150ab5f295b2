// Package mcp offers the tools of MCP servers (Model Context Protocol) to
// voxpipe's turns, through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): commands spoken to over stdio
// and streamable HTTP endpoints, as listed in the ecosystem's usual
// configuration file (Load).
//
// A Manager (Start) is a tools.Provider. Each tool keeps its own name
// unless two servers offer the same one; then every server's copy is
// named "server_tool". Names are rewritten to OpenAI's rule
// ^[a-zA-Z0-9_-]{1,64}$ (a call uses the real name) and decided over the
// last tools every server listed, connected or not, so that one server's
// restart does not rename another's tools. Description and input schema
// pass through unchanged.
//
// # Concurrency
//
// Each server has one supervising goroutine, started by Start and ended by
// Close, which owns its connection: connect, initialize, list the tools
// (every page), then wait for the session to end (the process exited, the
// endpoint stopped answering pings, a call saw the transport fail) and
// reconnect after a back-off that doubles from MinBackoff to MaxBackoff
// and is reset by a session that stayed up for HealthyAfter.
// notifications/tools/list_changed makes it list again. Tools reads an
// atomically swapped snapshot and never waits on a server; a tool's Call
// uses whatever session its server has at that moment, so it is safe for
// concurrent use and survives restarts.
package mcp
