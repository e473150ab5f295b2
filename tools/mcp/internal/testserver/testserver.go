// Package testserver is an MCP server for the tests of tools/mcp, built
// on the go-sdk's server side: tools that answer, sleep, flood, fail,
// crash and change the tool list, so the client is tested against the
// real protocol.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options shape the server.
type Options struct {
	// Tools to offer, by name; empty: all of them.
	Tools []string
	// PageSize of tools/list (0: the SDK's default, one page).
	PageSize int
	// Exit ends the process; the crash tool is offered only when it is set.
	Exit func(code int)
}

// All the tool names New knows.
var All = []string{"echo", "add", "slow", "big", "fail", "crash", "pid", "getenv", "image", "grow", "dotted.name"}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type slowIn struct {
	MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}

type bigIn struct {
	Bytes int    `json:"bytes"`
	Char  string `json:"char,omitempty" jsonschema:"what to repeat (default x)"`
}

type nameIn struct {
	Name string `json:"name"`
}

type none struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// New builds the server.
func New(o Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "voxpipe-testserver", Version: "1"}, &mcp.ServerOptions{PageSize: o.PageSize})
	want := func(name string) bool { return len(o.Tools) == 0 || slices.Contains(o.Tools, name) }
	if want("echo") {
		mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Sends the text back."},
			func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
				return text(in.Text), nil, nil
			})
	}
	if want("add") {
		mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
			func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
				return text(fmt.Sprint(in.A + in.B)), nil, nil
			})
	}
	if want("slow") {
		mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sleeps, then answers."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
				select {
				case <-time.After(time.Duration(in.MS) * time.Millisecond):
					return text("slept"), nil, nil
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			})
	}
	if want("big") {
		mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers with many bytes."},
			func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
				c := in.Char
				if c == "" {
					c = "x"
				}
				return text(strings.Repeat(c, in.Bytes/len(c))), nil, nil
			})
	}
	if want("fail") {
		mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
			func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
				return nil, nil, errors.New("it failed on purpose")
			})
	}
	if want("crash") && o.Exit != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Ends the server process."},
			func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
				fmt.Fprintln(os.Stderr, "testserver: crashing on request")
				o.Exit(3)
				return nil, nil, nil
			})
	}
	if want("pid") {
		mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."},
			func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
				return text(fmt.Sprint(os.Getpid())), nil, nil
			})
	}
	if want("getenv") {
		mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "An environment variable of the server."},
			func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
				return text(os.Getenv(in.Name)), nil, nil
			})
	}
	if want("image") {
		mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "A caption and an image."},
			func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{
					&mcp.TextContent{Text: "a picture"},
					&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 123)},
				}}, nil, nil
			})
	}
	if want("grow") {
		mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds a tool (the list changes)."},
			func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
				name := in.Name
				mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Added by grow."},
					func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
						return text("grown " + name), nil, nil
					})
				return text("added " + name), nil, nil
			})
	}
	if want("dotted.name") {
		mcp.AddTool(s, &mcp.Tool{Name: "dotted.name", Description: "A name with a dot."},
			func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
				return text("dotted"), nil, nil
			})
	}
	return s
}
