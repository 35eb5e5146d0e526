package mcpserve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// toolsMiddleware answers tools/list (the code-mode tools, then the
// registry's in gateway mode, as far as the caller may see them, a page
// at a time) and, in gateway mode, tools/call of a registry tool. The
// code-mode tools' calls go on to the SDK, which runs their handlers.
func (h *Handler) toolsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			end, err := h.begin(ctx)
			if err != nil {
				return nil, err
			}
			defer end()
			return h.listTools(ctx, r)
		case *mcp.CallToolRequest:
			end, err := h.begin(ctx)
			if err != nil {
				return nil, err
			}
			defer end()
			if r.Params != nil && !h.isCodeTool(r.Params.Name) && h.cfg.Expose.tools() {
				return h.callRegistryTool(ctx, r)
			}
		}
		return next(ctx, method, req)
	}
}

// cursor is the opaque page token: the last name of the page before.
func cursor(last string) string { return base64.RawURLEncoding.EncodeToString([]byte("after:" + last)) }

func fromCursor(c string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	last, ok := strings.CutPrefix(string(raw), "after:")
	if err != nil || !ok {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q: give the nextCursor of the page before", c)}
	}
	return last, nil
}

func (h *Handler) listTools(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	var after string
	if req.Params != nil && req.Params.Cursor != "" {
		var err error
		if after, err = fromCursor(req.Params.Cursor); err != nil {
			return nil, err
		}
	}
	// The code-mode tools come first, in their order; then the
	// registry's, by name (which always holds a '.', so never one of
	// theirs).
	var page []*mcp.Tool
	i := 0
	if after != "" {
		i = len(h.code)
		if j := slices.IndexFunc(h.code, func(t *mcp.Tool) bool { return t.Name == after }); j >= 0 {
			i = j + 1
		}
	}
	for ; i < len(h.code) && len(page) < h.limits.PageSize; i++ {
		page = append(page, h.code[i])
	}
	more := i < len(h.code)
	q := requestFrom(ctx)
	if h.cfg.Expose.tools() && len(page) < h.limits.PageSize {
		v := viewOf(q.callerOrNil())
		all := h.cfg.Registry.List()
		start := 0
		if after != "" && !h.isCodeTool(after) {
			start, _ = slices.BinarySearchFunc(all, after, func(t *manual.Tool, name string) int { return strings.Compare(t.Name, name) })
			if start < len(all) && all[start].Name == after {
				start++
			}
		}
		var size int64
		for _, t := range all[start:] {
			if !v.sees(t.Name) {
				continue
			}
			if len(page) == h.limits.PageSize {
				more = true
				break
			}
			page = append(page, mcpTool(t))
			size += toolSize(t)
		}
		if err := q.hold(ctx, "an MCP tools/list page", resultFactor*size); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "exprd's memory budget cannot hold this page now (memory_budget): retry later"}
		}
	} else if h.cfg.Expose.tools() {
		more = true
	}
	res := &mcp.ListToolsResult{Tools: page}
	// Stale at once (the registry changes at run time), and with auth on,
	// the caller's own: its scopes say what it sees.
	res.CacheScope = "public"
	if h.cfg.Verify != nil {
		res.CacheScope = "private"
	}
	if res.Tools == nil {
		res.Tools = []*mcp.Tool{}
	}
	if more && len(page) > 0 {
		res.NextCursor = cursor(page[len(page)-1].Name)
	}
	return res, nil
}

// callRegistryTool calls one registry tool as a CodeMode call would: the
// registry's executor, its egress policy, the answer read up to what
// CodeMode's result bound could take, under DefaultCallTimeout (and the
// template's own timeout).
func (h *Handler) callRegistryTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := req.Params.Name
	t, err := h.cfg.Registry.Tool(name)
	if err != nil || !viewOf(requestFrom(ctx).callerOrNil()).sees(t.Name) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	if h.approval.has(t.Name) {
		if len(req.Params.Arguments) > MaxApprovalArgsBytes {
			return toolError("tool %q needs a person's approval, and its %d bytes of arguments are more than a person is asked about (%d): send less",
				t.Name, len(req.Params.Arguments), MaxApprovalArgsBytes), nil
		}
		msg := fmt.Sprintf("An agent asks to call %q with these arguments, which needs your approval. Call it?\n\n%s", t.Name, req.Params.Arguments)
		if res := h.approve(ctx, req, []string{t.Name}, msg); res != nil {
			return res, nil
		}
	}
	// Decoded, small JSON values take tens of times their bytes (an
	// array of zeros, 42 times): reserved before they are decoded.
	raw := req.Params.Arguments
	if err := requestFrom(ctx).hold(ctx, "an MCP tool call's arguments", argsFactor*int64(len(raw))); err != nil {
		return toolError("tool %q: exprd's memory budget cannot hold these %d bytes of arguments decoded now (memory_budget): retry later, or send less", t.Name, len(raw)), nil
	}
	var args map[string]any
	if err := decodeArgs(raw, &args); err != nil {
		return toolError("tool %q: %v", t.Name, err), nil
	}
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := callCtx(ctx)
	defer cancel()
	ctx, stop := context.WithTimeout(ctx, min(DefaultCallTimeout, h.limits.MaxTimeout))
	defer stop()
	ctx = utcp.WithResponseLimit(ctx, 2*int64(codemode.DefaultMaxResultBytes)+1024)
	v, err := h.cfg.Registry.Call(ctx, t.Name, args)
	if err != nil {
		if ctx.Err() != nil {
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) || errors.Is(err, utcp.ErrTimeout) {
				return toolError("tool %q failed: it took longer than %v", t.Name, min(DefaultCallTimeout, h.limits.MaxTimeout)), nil
			}
			return toolError("tool %q failed: %s", t.Name, ctxReason(ctx, err)), nil
		}
		return toolError("tool %q failed: %v", t.Name, err), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return toolError("tool %q: its result cannot be written as JSON: %v", t.Name, err), nil
	}
	if len(b) > codemode.DefaultMaxResultBytes {
		return toolError("tool %q: the result is %d bytes of JSON, over the limit of %d", t.Name, len(b), codemode.DefaultMaxResultBytes), nil
	}
	if _, ok := v.(map[string]any); !ok {
		// structuredContent is an object; a tool's other value is text.
		if err := requestFrom(ctx).hold(ctx, "an MCP tool result", resultFactor*int64(len(b))); err != nil {
			return toolError("exprd's memory budget cannot hold this %d-byte result now (memory_budget): retry later", len(b)), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	}
	return structured(ctx, json.RawMessage(b), false), nil
}
