package mcptransport

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
)

// ListLimitError is a server whose tools/list goes past what exprd reads:
// MaxListPages pages, or MaxToolsPerServer tools.
type ListLimitError struct {
	Server string
	What   string // "pages" or "tools"
	Limit  int
}

func (e *ListLimitError) Error() string {
	if e.What == "pages" {
		return fmt.Sprintf("MCP server %q lists its tools in more than %d pages (the most exprd reads)", e.Server, e.Limit)
	}
	return fmt.Sprintf("MCP server %q lists more than %d tools (the most exprd reads)", e.Server, e.Limit)
}

// listTools reads every page of a server's tools/list, following
// nextCursor, at most MaxListPages pages and MaxToolsPerServer tools.
func listTools(ctx context.Context, cs *mcp.ClientSession, server string) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		if page > MaxListPages {
			return nil, listLimit(&ListLimitError{Server: server, What: "pages", Limit: MaxListPages})
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, listError(ctx, err)
		}
		tools = append(tools, res.Tools...)
		if len(tools) > MaxToolsPerServer {
			return nil, listLimit(&ListLimitError{Server: server, What: "tools", Limit: MaxToolsPerServer})
		}
		if res.NextCursor == "" {
			return tools, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

func listLimit(e *ListLimitError) error {
	return (&utcp.TransportError{Reason: utcp.ReasonTooLarge, Body: e.Error()}).WithCause(e)
}

// listError is a tools/list that failed.
func listError(ctx context.Context, err error) error {
	var te *utcp.TransportError
	if errors.As(err, &te) {
		return te
	}
	if ctx.Err() != nil {
		return (&utcp.TransportError{Reason: utcp.ReasonUnreachable, Body: "the MCP server did not list its tools in time"}).WithCause(err)
	}
	return (&utcp.TransportError{Reason: utcp.ReasonMalformed, Body: "the MCP server's tools/list failed"}).WithCause(err)
}

func asListLimit(err error, target **ListLimitError) bool { return errors.As(err, target) }
