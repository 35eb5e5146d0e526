package mcptransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// stdioServerEnv makes the test binary a stdio MCP server (the tests'
// manuals run it): a go-sdk server with tools that tell its environment
// and pid, and one that exits.
const stdioServerEnv = "MCPTRANSPORT_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) == "1" {
		runStdioServer()
		return
	}
	code := m.Run()
	if code == 0 {
		// exprd's side leaves nothing running. A go-sdk test server keeps
		// the session of a client that went away without ending it (the
		// SDK's server holds abandoned sessions): that one is the test
		// servers', not exprd's.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func runStdioServer() {
	fmt.Fprintln(os.Stderr, "stdio test server starting")
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	answer := func(v any) *mcp.CallToolResult {
		raw, _ := json.Marshal(v)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}
	}
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "env", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return answer(os.Environ()), nil
	})
	s.AddTool(&mcp.Tool{Name: "pid", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return answer(os.Getpid()), nil
	})
	s.AddTool(&mcp.Tool{Name: "exit", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "bad", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Stdout.Write([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"\xff\"}}\n"))
		select {}
	})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}
