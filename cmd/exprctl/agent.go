package main

import (
	"encoding/json"
	"fmt"
	"os"
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
	stateFile := fs.String("state", "", "a JSON file sent as the expr tool's state")
	var utcpTools, codemodeTools listFlag
	fs.Var(&utcpTools, "utcp", "declare UTCP tools as NAME=TOOL (add=math.add), or TOOL to use its own name with dots as _")
	fs.Var(&codemodeTools, "codemode", "declare the built-in codemode tool over these UTCP tools")
	maxSteps := fs.Uint("max-steps", 0, "stop after this many steps (0: the server's default, 10)")
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
	if *stateFile != "" {
		data, err := os.ReadFile(*stateFile)
		if err != nil {
			return usagef("--state: %v", err)
		}
		if err := send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_State{State: &exprdv1.State{StateJson: string(data)}}}); err != nil {
			return err
		}
	}
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
			fmt.Fprintf(out, "done: %s after %d steps, %d tokens\n%s\n", d.GetStopReason(), len(d.GetSteps()), d.GetUsage().GetTotalTokens(), d.GetText())
			_ = stream.CloseSend()
			return nil
		}
	}
}

func compactJSON(b string) string {
	var v any
	if json.Unmarshal([]byte(b), &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return string(out)
}
