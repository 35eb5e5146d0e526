package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// agentCmd runs one AgentLoop turn and prints it as it streams.
func agentCmd(e *env, args []string) error {
	fs := e.newFlagSet("agent")
	prompt := fs.String("prompt", "", "the user's message (required)")
	provider := fs.String("provider", "", "the model provider (empty: the server's default)")
	system := fs.String("system", "", "the system prompt")
	withExpr := fs.Bool("expr", false, "declare the built-in expr tool on the session's state")
	read := fs.Bool("read", false, "the expr tool allows read")
	statePath := fs.String("state", "", "a file holding the expr tool's state as a JSON object")
	var utcpTools, codemodeTools listFlag
	fs.Var(&utcpTools, "utcp", "declare UTCP tools as NAME=TOOL (add=math.add), or TOOL to use its own name with dots as _")
	fs.Var(&codemodeTools, "codemode", "declare the built-in codemode tool over these UTCP tools")
	maxSteps := fs.Uint("max-steps", 0, "stop after this many steps (0: the server's default, 10)")
	toolChoice := fs.String("tool-choice", "", "whether the model must call a tool: auto (the default), none, required, or a declared tool's name")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *prompt == "" {
		return usagef("--prompt is required")
	}
	steps, err := uint32Flag("max-steps", *maxSteps)
	if err != nil {
		return err
	}
	state, err := stateFile(*statePath)
	if err != nil {
		return err
	}
	start := &exprdv1.AgentStart{Provider: *provider, System: *system,
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: *prompt}}}
	if *withExpr {
		start.Tools = append(start.Tools, &exprdv1.AgentTool{Name: "expr", Executor: exprdv1.AgentTool_EXECUTOR_EXPR})
		start.ExprSettings = &exprdv1.Settings{Read: *read}
	}
	for _, u := range utcpTools {
		name, tool, ok := strings.Cut(u, "=")
		if !ok {
			name, tool = strings.ReplaceAll(u, ".", "_"), u
		}
		start.Tools = append(start.Tools, &exprdv1.AgentTool{Name: name, Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: tool})
	}
	if len(codemodeTools) > 0 {
		start.Tools = append(start.Tools, &exprdv1.AgentTool{Name: "codemode", Description: "Runs Expr code that chains tools: " + strings.Join(codemodeTools, ", "),
			Executor: exprdv1.AgentTool_EXECUTOR_CODEMODE, CodemodeTools: codemodeTools})
	}
	if steps > 0 {
		start.Stop = &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: steps}}
	}
	if start.ToolChoice, err = parseToolChoice(*toolChoice, start.Tools); err != nil {
		return err
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	stream, err := c.AgentLoop().Run(e.ctx)
	if err != nil {
		return err
	}
	send := func(m *exprdv1.AgentLoopRunRequest) error { return stream.Send(m) }
	if err := send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
		return err
	}
	if state != nil {
		if err := send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_State{State: &exprdv1.State{StateJson: string(state)}}}); err != nil {
			return err
		}
	}
	// A refused state is told after the turn, which ran on the old one.
	var rejected []string
	out := e.stdout
	inText := false
	endText := func() {
		if inText {
			fmt.Fprintln(out)
			inText = false
		}
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			endText()
			return err
		}
		switch ev := m.GetEvent().(type) {
		case *exprdv1.AgentLoopRunResponse_StepStarted:
			fmt.Fprintf(out, "step %d\n", ev.StepStarted.GetStep())
		case *exprdv1.AgentLoopRunResponse_TextDelta:
			if !inText {
				fmt.Fprint(out, "text ")
				inText = true
			}
			fmt.Fprint(out, ev.TextDelta.GetText())
		case *exprdv1.AgentLoopRunResponse_ToolCallRequested:
			endText()
			call := ev.ToolCallRequested.GetCall()
			fmt.Fprintf(out, "call %s %s\n", call.GetName(), compactJSON(call.GetArgumentsJson()))
		case *exprdv1.AgentLoopRunResponse_StateWrite:
			endText()
			fmt.Fprintf(out, "write path=%s value=%s\n", ev.StateWrite.GetPath(), ev.StateWrite.GetValueJson())
		case *exprdv1.AgentLoopRunResponse_ToolResult:
			r := ev.ToolResult
			kind := "result"
			if r.GetIsError() {
				kind = "error"
			}
			fmt.Fprintf(out, "%s %s %s\n", kind, r.GetName(), compactJSON(r.GetOutputJson()))
		case *exprdv1.AgentLoopRunResponse_StepFinished:
			endText()
			s := ev.StepFinished
			fmt.Fprintf(out, "step %d finished: %s, %d tokens\n", s.GetStep(), s.GetFinishReason(), s.GetUsage().GetTotalTokens())
		case *exprdv1.AgentLoopRunResponse_Done:
			endText()
			d := ev.Done
			fmt.Fprintf(out, "done: %s after %d steps, %d tokens\n%s\n", stopReasonName(d.GetStopReason()), len(d.GetSteps()), d.GetUsage().GetTotalTokens(), d.GetText())
			_ = stream.CloseSend()
			if len(rejected) > 0 {
				return errors.New(strings.Join(rejected, "; "))
			}
			return nil
		case *exprdv1.AgentLoopRunResponse_Rejected:
			rejected = append(rejected, rejectedText(ev.Rejected))
		}
	}
}

// toolChoices are --tool-choice's words; any other value names a tool.
var toolChoices = map[string]exprdv1.ToolChoice_Mode{
	"auto":     exprdv1.ToolChoice_MODE_AUTO,
	"none":     exprdv1.ToolChoice_MODE_NONE,
	"required": exprdv1.ToolChoice_MODE_REQUIRED,
}

// parseToolChoice reads --tool-choice: nil (auto) when not given; a
// required or named tool needs it declared.
func parseToolChoice(v string, tools []*exprdv1.AgentTool) (*exprdv1.ToolChoice, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.GetName())
	}
	if mode, ok := toolChoices[v]; ok {
		if mode == exprdv1.ToolChoice_MODE_REQUIRED && len(names) == 0 {
			return nil, usagef("--tool-choice required: declare a tool (--expr, --utcp, --codemode)")
		}
		return &exprdv1.ToolChoice{Mode: mode}, nil
	}
	if !slices.Contains(names, v) {
		return nil, usagef("--tool-choice %q: want auto, none, required or a declared tool's name (declared: %s)", v, strings.Join(names, ", "))
	}
	return &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_TOOL, Tool: v}, nil
}

func compactJSON(b string) string {
	var v any
	if json.Unmarshal([]byte(b), &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// stopReasonName is a turn's stop reason as exprctl prints it: completed,
// stop_condition.
func stopReasonName(r exprdv1.AgentDone_StopReason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "STOP_REASON_"))
}
