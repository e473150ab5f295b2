// Command mcp-testserver runs the tools/mcp test server over stdio.
//
//	mcp-testserver [-tools echo,add] [-pagesize 2] [-die "message"]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/voxpipe/voxpipe/tools/mcp/internal/testserver"
)

func main() {
	list := flag.String("tools", "", "comma-separated tools to offer (default all: "+strings.Join(testserver.All, ",")+")")
	pageSize := flag.Int("pagesize", 0, "tools/list page size (0: one page)")
	die := flag.String("die", "", "print this to stderr and exit 1 at once (a server that cannot start)")
	flag.Parse()
	if *die != "" {
		fmt.Fprintln(os.Stderr, *die)
		os.Exit(1)
	}
	o := testserver.Options{PageSize: *pageSize, Exit: os.Exit}
	if *list != "" {
		o.Tools = strings.Split(*list, ",")
	}
	if err := testserver.New(o).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-testserver:", err)
		os.Exit(1)
	}
}
