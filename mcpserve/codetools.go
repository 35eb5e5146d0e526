package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/search"
)

// The code-mode tools' names, as @utcp/code-mode-mcp names them.
const (
	toolSearch = "search_tools"
	toolInfo   = "tools_info"
	toolChain  = "call_tool_chain"
)

var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}

func (h *Handler) addCodeTools() {
	tools := []struct {
		tool *mcp.Tool
		fn   mcp.ToolHandler
	}{
		{&mcp.Tool{
			Name: toolSearch, Title: "Search the tools",
			Description: "Find the tools for a task: describe the task in a sentence (what you want done, not only keywords). " +
				"Each tool comes with its full name, its inputs as {name: type, optional?: type} and what it does; " +
				"call tools_info for their full schemas, and call_tool_chain to call them.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"task_description":{"type":"string","description":"the task, in a sentence"},` +
				fmt.Sprintf(`"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"how many tools (default %d)"}},`, MaxSearchLimit, DefaultSearchLimit) +
				`"required":["task_description"]}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"tools":{"type":"array","items":{"type":"object","properties":{` +
				`"name":{"type":"string"},"inputs":{"type":"string"},"description":{"type":"string"}}}}},"required":["tools"]}`),
			Annotations: readOnly,
		}, h.searchTools},
		{&mcp.Tool{
			Name: toolInfo, Title: "Describe tools",
			Description: fmt.Sprintf("The full description and JSON Schemas (input, output) of tools, by their full names (at most %d).", MaxInfoNames),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":%d,`+
				`"description":"the tools' full names, as search_tools gives them"}},"required":["names"]}`, MaxInfoNames)),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"tools":{"type":"array","items":{"type":"object"}},` +
				`"not_found":{"type":"array","items":{"type":"object"}}},"required":["tools"]}`),
			Annotations: readOnly,
		}, h.toolsInfo},
		{&mcp.Tool{
			Name: toolChain, Title: "Run a chain of tool calls",
			Description: "Run an Expr program that calls tools, and get its value and the trace of its calls. " +
				`Call a tool with codemode.CallTool("manual.tool", {arg: value}) (a streaming one with codemode.CallToolStream, ` +
				`which returns its chunks); bind results with let (let r = codemode.CallTool(...); r.field), separate expressions with ";"; ` +
				"the last expression is the value. Expr's builtins (map, filter, len, ...) work; nothing else is reachable. " +
				"The program may call the tools its source names as string literals. " +
				fmt.Sprintf("At most %d tool calls, %d characters of code, %d bytes of JSON a result.",
					codemode.DefaultMaxToolCalls, codemode.DefaultMaxSourceLength, codemode.DefaultMaxResultBytes),
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"code":{"type":"string","description":"the Expr program"},` +
				fmt.Sprintf(`"timeout":{"type":"integer","minimum":0,"description":"the run's time budget in milliseconds (default %d)"}},`, DefaultCallTimeout.Milliseconds()) +
				`"required":["code"]}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"value":{},"trace":{"type":"array","items":{"type":"object"}},` +
				`"error":{"type":"object"}}}`),
			Annotations: &mcp.ToolAnnotations{OpenWorldHint: new(true)},
		}, h.callToolChain},
	}
	for _, t := range tools {
		h.server.AddTool(t.tool, t.fn)
		h.code = append(h.code, t.tool)
	}
}

func (h *Handler) isCodeTool(name string) bool {
	return slices.ContainsFunc(h.code, func(t *mcp.Tool) bool { return t.Name == name })
}

// toolError is a result the model should read and act on.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// decodeArgs reads a call's arguments into v: an object, or nothing.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var ae argError
		var tm tooManyNames
		if errors.As(err, &ae) || errors.As(err, &tm) {
			return err
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return fmt.Errorf("the arguments must be an object, got %s", te.Value)
			}
			return fmt.Errorf("%s must be %s, got %s", te.Field, kindOf(te.Type.Kind().String()), te.Value)
		}
		return fmt.Errorf("the arguments are not JSON: %v", err)
	}
	return nil
}

func kindOf(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "slice":
		return "an array"
	}
	return "a " + goKind
}

// structured answers v as structuredContent and as its JSON text,
// reserving what it holds until the request ends.
func structured(ctx context.Context, v any, isError bool) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return toolError("the result cannot be written as JSON: %v", err)
	}
	if err := requestFrom(ctx).hold(ctx, "an MCP tool result", resultFactor*int64(len(b))); err != nil {
		return toolError("exprd's memory budget cannot hold this %d-byte result now (memory_budget): retry later, or ask for less", len(b))
	}
	return &mcp.CallToolResult{IsError: isError, StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

// searched is one tool as search_tools renders it.
type searched struct {
	Name        string `json:"name"`
	Inputs      string `json:"inputs"`
	Description string `json:"description"`
}

func (h *Handler) searchTools(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		TaskDescription string `json:"task_description"`
		Limit           *int   `json:"limit"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return toolError("search_tools: %v", err), nil
	}
	if strings.TrimSpace(in.TaskDescription) == "" {
		return toolError("search_tools: task_description is empty: describe the task in a sentence"), nil
	}
	limit := DefaultSearchLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	if limit < 1 || limit > MaxSearchLimit {
		return toolError("search_tools: limit %d: want 1 to %d", limit, MaxSearchLimit), nil
	}
	ctx, cancel := callCtx(ctx)
	defer cancel()
	v := viewOf(requestFrom(ctx).callerOrNil())
	ask := limit
	if !v.all {
		ask = 0 // every match, then the caller's
	}
	// A task told at length ranks by its first terms, as CodeMode's
	// prompt mode ranks a prompt.
	results, err := h.cfg.Registry.SearchContext(ctx, search.TrimQuery(in.TaskDescription), ask)
	var qe *utcp.QueryError
	switch {
	case errors.As(err, &qe):
		return toolError("search_tools: task_description has %d %s, over the limit of %d: say it shorter", qe.Got, qe.What, qe.Limit), nil
	case err != nil:
		return toolError("search_tools: the search was cut short: %v", ctxReason(ctx, err)), nil
	}
	out := struct {
		Tools []searched `json:"tools"`
	}{Tools: []searched{}}
	for _, r := range results {
		if len(out.Tools) == limit {
			break
		}
		if v.sees(r.Tool.Name) {
			out.Tools = append(out.Tools, searched{Name: r.Tool.Name, Inputs: signature(r.Tool.Inputs), Description: summary(r.Tool.Description)})
		}
	}
	res := structured(ctx, out, false)
	if !res.IsError {
		// The text is the compact form itself: a line a tool.
		var b strings.Builder
		for _, t := range out.Tools {
			fmt.Fprintf(&b, "%s(%s): %s\n", t.Name, t.Inputs, t.Description)
		}
		if len(out.Tools) == 0 {
			b.WriteString("no tool matches: describe the task differently\n")
		}
		res.Content = []mcp.Content{&mcp.TextContent{Text: b.String()}}
	}
	return res, nil
}

// described is one tool as tools_info gives it.
type described struct {
	Name         string                  `json:"name"`
	Title        string                  `json:"title,omitempty"`
	Description  string                  `json:"description"`
	InputSchema  json.RawMessage         `json:"input_schema"`
	OutputSchema json.RawMessage         `json:"output_schema,omitempty"`
	Annotations  *manual.ToolAnnotations `json:"annotations,omitempty"`
	NeedsApprove bool                    `json:"needs_approval,omitempty"`
}

type notFound struct {
	Name    string   `json:"name"`
	Similar []string `json:"similar,omitempty"`
}

// infoNames is tools_info's names, decoded up to MaxInfoNames: past it
// the rest is not decoded (a long list would cost a string a name before
// it could be refused), only counted.
type infoNames []string

// tooManyNames is the error of a list past MaxInfoNames.
type tooManyNames int

func (n tooManyNames) Error() string {
	return fmt.Sprintf("%d names or more: give 1 to %d", int(n), MaxInfoNames)
}

func (n *infoNames) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return argError("names must be an array of strings")
	}
	for dec.More() {
		if len(*n) == MaxInfoNames {
			return tooManyNames(MaxInfoNames + 1)
		}
		var s string
		if err := dec.Decode(&s); err != nil {
			return argError("names must be an array of strings")
		}
		*n = append(*n, s)
	}
	return nil
}

// argError is a mistake in a call's arguments, said as it is.
type argError string

func (e argError) Error() string { return string(e) }

func (h *Handler) toolsInfo(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Names infoNames `json:"names"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return toolError("tools_info: %v", err), nil
	}
	if len(in.Names) == 0 {
		return toolError("tools_info: 0 names: give 1 to %d", MaxInfoNames), nil
	}
	// A name asked twice is answered once (not its schemas twice).
	seen := make(map[string]bool, len(in.Names))
	names := in.Names[:0]
	for _, n := range in.Names {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	in.Names = names
	v := viewOf(requestFrom(ctx).callerOrNil())
	out := struct {
		Tools    []described `json:"tools"`
		NotFound []notFound  `json:"not_found,omitempty"`
	}{Tools: []described{}}
	for _, name := range in.Names {
		t, err := h.cfg.Registry.Tool(name)
		if err != nil || !v.sees(t.Name) {
			nf := notFound{Name: name}
			var e *utcp.NotFoundError
			if errors.As(err, &e) {
				for _, s := range e.Similar {
					if v.sees(s) {
						nf.Similar = append(nf.Similar, s)
					}
				}
			}
			out.NotFound = append(out.NotFound, nf)
			continue
		}
		in := t.Inputs
		if len(in) == 0 {
			in = json.RawMessage(`{"type":"object"}`)
		}
		out.Tools = append(out.Tools, described{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: in,
			OutputSchema: t.Outputs, Annotations: t.Annotations, NeedsApprove: h.approval.has(t.Name)})
	}
	if len(out.Tools) == 0 {
		msg := "tools_info: no such tool: " + strings.Join(in.Names, ", ")
		if s := similar(out.NotFound); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		return toolError("%s; search_tools finds tools by task", msg), nil
	}
	return structured(ctx, out, false), nil
}

func similar(nf []notFound) string {
	var all []string
	for _, n := range nf {
		all = append(all, n.Similar...)
	}
	return strings.Join(all, ", ")
}

// traced is one tool call of a run's trace.
type traced struct {
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	DurationMs float64         `json:"duration_ms"`
	Outcome    string          `json:"outcome"`
	Error      string          `json:"error,omitempty"`
}

type runError struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

func traceOf(calls []codemode.Call) []traced {
	out := make([]traced, len(calls))
	for i, c := range calls {
		out[i] = traced{Tool: c.Tool, Arguments: c.ArgsJSON(), DurationMs: float64(c.Duration) / float64(time.Millisecond), Outcome: string(c.Outcome), Error: c.Error}
	}
	return out
}

func (h *Handler) callToolChain(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Code    string   `json:"code"`
		Timeout *float64 `json:"timeout"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return toolError("call_tool_chain: %v", err), nil
	}
	if strings.TrimSpace(in.Code) == "" {
		return toolError("call_tool_chain: code is empty: give an Expr program"), nil
	}
	timeout := DefaultCallTimeout
	if in.Timeout != nil && *in.Timeout != 0 {
		ms := *in.Timeout
		if ms < 0 || ms > float64(h.limits.MaxTimeout.Milliseconds()) {
			return toolError("call_tool_chain: timeout %v ms: want 0 (the default, %d) to the server's maximum of %d ms",
				ms, DefaultCallTimeout.Milliseconds(), h.limits.MaxTimeout.Milliseconds()), nil
		}
		timeout = time.Duration(ms * float64(time.Millisecond))
	}
	timeout = min(timeout, h.limits.MaxTimeout)
	b := codemode.Budgets{Timeout: timeout}

	// The whitelist: the tools the source names, as far as the caller
	// may see them; a name it may not see is refused by the run as any
	// tool off the whitelist is, with its position.
	a, err := h.rt.Check(in.Code, nil, b)
	if a == nil {
		return h.runFailed(ctx, err, nil), nil
	}
	v := viewOf(requestFrom(ctx).callerOrNil())
	var tools, need []string
	for _, name := range a.UsedTools() {
		if !v.sees(name) {
			continue
		}
		if h.approval.has(name) {
			need = append(need, name)
		}
		tools = append(tools, name)
	}
	if len(need) > 0 {
		// Approved, the program calls them as it calls any tool it names:
		// the approval is of every call of them this program makes.
		if res := h.approve(ctx, req, need, approvalMessage(need, in.Code)); res != nil {
			return res, nil
		}
	}
	ctx, cancel := callCtx(ctx)
	defer cancel()
	res, err := h.rt.Run(ctx, in.Code, codemode.RunOptions{Tools: tools, Budgets: b, Visible: v.Func()})
	if err != nil {
		return h.runFailed(ctx, err, res.Trace), nil
	}
	return structured(ctx, struct {
		Value json.RawMessage `json:"value"`
		Trace []traced        `json:"trace"`
	}{res.ValueJSON, traceOf(res.Trace)}, false), nil
}

// runFailed answers a run's failure: its reason and message, and the
// calls it made, for the model to fix; a run the overload manager or
// the client ended says so.
// approvalMessage is what the user is asked before a program runs.
func approvalMessage(need []string, code string) string {
	return fmt.Sprintf("An agent asks to run this program, which calls %s. Each needs your approval; approving lets the program make "+
		"every call of them it makes (with the arguments it computes). Run it?\n\n%s", quoted(need), code)
}

func (h *Handler) runFailed(ctx context.Context, err error, trace []codemode.Call) *mcp.CallToolResult {
	var ce *codemode.Error
	if !errors.As(err, &ce) {
		h.log.ErrorContext(ctx, "mcp: call_tool_chain could not run", "err", err)
		return toolError("call_tool_chain: the run failed on the server's side")
	}
	e := runError{Reason: string(ce.Reason), Message: ce.Message, Line: ce.Line, Column: ce.Column}
	if cause := context.Cause(ctx); errors.Is(cause, overload.ErrOverloaded) {
		e = runError{Reason: string(codemode.BudgetExceeded), Message: "exprd is overloaded: the run was cancelled to keep its memory under its line; retry later"}
	}
	return structured(ctx, struct {
		Error runError `json:"error"`
		Trace []traced `json:"trace"`
	}{e, traceOf(trace)}, true)
}

// ctxReason says why a request's work ended early.
func ctxReason(ctx context.Context, err error) string {
	if cause := context.Cause(ctx); errors.Is(cause, overload.ErrOverloaded) {
		return "exprd is overloaded; retry later"
	}
	return err.Error()
}

func (q *request) callerOrNil() *Caller {
	if q == nil {
		return nil
	}
	return q.caller
}
