package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"google.golang.org/protobuf/proto"
)

// startOnly are agent's flags that make a turn's start: --resume
// follows a turn started earlier and takes none of them.
var startOnly = []string{"prompt", "provider", "system", "expr", "read", "state", "utcp", "codemode",
	"max-steps", "tool-choice", "needs-approval", "client-tool"}

// agentCmd runs one AgentLoop turn, or follows one started earlier
// (--resume), and prints it as it streams.
func agentCmd(e *env, args []string) error {
	fs := e.newFlagSet("agent")
	prompt := fs.String("prompt", "", "the user's message (required, unless --resume)")
	resume := fs.String("resume", "", "follow the turn `TURN_ID[:SEQ]` started earlier: its events after SEQ (default 0, all; negative counts back from the latest), then the new ones")
	provider := fs.String("provider", "", "the model provider (empty: the server's default)")
	system := fs.String("system", "", "the system prompt")
	withExpr := fs.Bool("expr", false, "declare the built-in expr tool on the session's state")
	read := fs.Bool("read", false, "the expr tool allows read")
	statePath := fs.String("state", "", "a file holding the expr tool's state as a JSON object")
	var utcpTools, codemodeTools, clientTools, approval listFlag
	fs.Var(&utcpTools, "utcp", "declare UTCP tools as NAME=TOOL (add=math.add), or TOOL to use its own name with dots as _")
	fs.Var(&codemodeTools, "codemode", "declare the built-in codemode tool over these UTCP tools")
	fs.Var(&clientTools, "client-tool", "declare client-run tools exprctl runs: downloadCsv")
	fs.Var(&approval, "needs-approval", "declared `TOOLS` whose every call waits for a y/N answer on the terminal (A,B or repeated)")
	yes := fs.Bool("yes", false, "approve every call without asking")
	no := fs.Bool("no", false, "deny every call without asking")
	csvOut := fs.String("csv-out", "", "write downloadCsv's CSV to this file instead of stdout")
	maxSteps := fs.Uint("max-steps", 0, "stop after this many steps (0: the server's default, 10)")
	toolChoice := fs.String("tool-choice", "", "whether the model must call a tool: auto (the default), none, required, or a declared tool's name")
	reconnect := fs.Int("reconnect", client.DefaultReconnectAttempts, "after a dropped connection, resume the turn by itself, giving up after this many failed attempts in a row (0: never; the turn is then not started detached)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *yes && *no {
		return usagef("--yes and --no contradict each other")
	}
	if *reconnect < 0 {
		return usagef("--reconnect %d: want 0 or more attempts", *reconnect)
	}
	var rc *client.Reconnect
	if *reconnect > 0 {
		rc = &client.Reconnect{MaxAttempts: *reconnect}
	}
	for _, name := range clientTools {
		if _, ok := builtinClientFunctions[name]; !ok {
			return usagef("--client-tool %s: exprctl runs only %s", name, strings.Join(slices.Sorted(maps.Keys(builtinClientFunctions)), ", "))
		}
	}
	var turnID string
	var afterSeq int64
	if *resume != "" {
		var given []string
		fs.Visit(func(f *flag.Flag) {
			if slices.Contains(startOnly, f.Name) {
				given = append(given, "--"+f.Name)
			}
		})
		if len(given) > 0 {
			return usagef("--resume follows a turn started earlier: %s make a new turn", strings.Join(given, ", "))
		}
		var err error
		if turnID, afterSeq, err = parseResume(*resume); err != nil {
			return err
		}
	} else if *prompt == "" {
		return usagef("--prompt is required (or --resume a turn)")
	}
	var start *exprdv1.AgentStart
	var state []byte
	if turnID == "" {
		steps, err := uint32Flag("max-steps", *maxSteps)
		if err != nil {
			return err
		}
		if state, err = stateFile(*statePath); err != nil {
			return err
		}
		start = &exprdv1.AgentStart{Provider: *provider, System: *system, Detach: proto.Bool(rc != nil), StateJson: string(state),
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
		for _, name := range clientTools {
			f := builtinClientFunctions[name]
			start.Tools = append(start.Tools, &exprdv1.AgentTool{Name: name, Description: f.GetDescription(),
				ParametersJson: f.GetInputSchemaJson(), Executor: exprdv1.AgentTool_EXECUTOR_CLIENT})
		}
		for _, name := range approval {
			i := slices.IndexFunc(start.Tools, func(t *exprdv1.AgentTool) bool { return t.GetName() == name })
			if i < 0 {
				return usagef("--needs-approval %s: not a declared tool", name)
			}
			start.Tools[i].NeedsApproval = true
		}
		if steps > 0 {
			start.Stop = &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: steps}}
		}
		if start.ToolChoice, err = parseToolChoice(*toolChoice, start.Tools); err != nil {
			return err
		}
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()

	out := &lockedWriter{w: e.stdout}
	p := &turnPrinter{out: out}
	term := newTerminal(e.stdin, e.stderr, *yes, *no)
	var mu sync.Mutex
	var rejected []string
	csv := downloadCsv(out, *csvOut, e.stderr)
	h := client.TurnHandlers{
		OnEvent: p.event,
		Tools: map[string]client.ToolFunc{"downloadCsv": func(ctx context.Context, call *exprdv1.AgentToolCall) (json.RawMessage, error) {
			return csv(ctx, json.RawMessage(call.GetArgumentsJson()))
		}},
		OnApproval: func(ctx context.Context, r *exprdv1.AgentApprovalRequest) (bool, string, error) {
			call := r.GetCall()
			ok, err := term.ask(ctx, fmt.Sprintf("approve %s %s?", call.GetName(), compactJSON(call.GetArgumentsJson())))
			return ok, "the user said no", err
		},
		OnRejected: func(r *exprdv1.Rejected) {
			mu.Lock()
			rejected = append(rejected, rejectedText(r))
			mu.Unlock()
		},
		OnReconnect: func(err error, attempt int, wait time.Duration) {
			fmt.Fprintf(e.stderr, "exprctl agent: the connection dropped (%s); resuming turn %s after seq %d in %s (attempt %d of %d)\n",
				e.errorText(err), p.turnID(), p.lastSeq(), wait.Round(time.Millisecond), attempt, rc.MaxAttempts)
		},
	}
	// Ctrl-C cancels the turn (a detached one would go on without us),
	// and waits briefly for its stream to say so.
	ctx, stop := context.WithCancel(context.WithoutCancel(e.ctx))
	defer stop()
	var turn *client.Turn
	if start != nil {
		turn, err = c.StartTurn(ctx, start, h, rc)
	} else {
		fmt.Fprintf(out, "turn %s\n", turnID)
		p.setID(turnID)
		turn, err = c.ResumeTurn(ctx, turnID, afterSeq, h, rc)
	}
	if err != nil {
		return err
	}
	waited := make(chan struct{})
	go func() {
		select {
		case <-waited:
			return
		case <-e.ctx.Done():
		}
		cctx, cancel := context.WithTimeout(ctx, client.CancelWait)
		defer cancel()
		_, _ = turn.Cancel(cctx)
		select {
		case <-waited:
		case <-cctx.Done():
			stop()
		}
	}()
	_, err = turn.Wait()
	close(waited)
	p.endText()
	if err != nil {
		if e.ctx.Err() != nil {
			return fmt.Errorf("interrupted: turn %s cancelled: %s", turn.ID(), e.errorText(err))
		}
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	// A refused state is told after the turn, which ran on the old one.
	if len(rejected) > 0 {
		return errors.New(strings.Join(rejected, "; "))
	}
	return nil
}

// parseResume reads --resume's TURN_ID[:SEQ].
func parseResume(v string) (string, int64, error) {
	id, seq, hasSeq := strings.Cut(strings.TrimSpace(v), ":")
	if id == "" {
		return "", 0, usagef("--resume %q: want TURN_ID[:SEQ]", v)
	}
	if !hasSeq {
		return id, 0, nil
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return "", 0, usagef("--resume %q: SEQ is a whole number (negative counts back from the latest event)", v)
	}
	return id, n, nil
}

// turnPrinter prints a turn's events as they come, for people: the turn's
// id first, so that it can be resumed.
type turnPrinter struct {
	out    io.Writer
	mu     sync.Mutex
	id     string
	last   uint64
	inText bool
}

func (p *turnPrinter) setID(id string) {
	p.mu.Lock()
	p.id = id
	p.mu.Unlock()
}

func (p *turnPrinter) turnID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

func (p *turnPrinter) lastSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *turnPrinter) endText() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endTextLocked()
}

func (p *turnPrinter) endTextLocked() {
	if p.inText {
		fmt.Fprintln(p.out)
		p.inText = false
	}
}

func (p *turnPrinter) event(m *exprdv1.AgentLoopRunResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = m.GetSeq()
	if p.id == "" && m.GetTurnId() != "" {
		p.id = m.GetTurnId()
		fmt.Fprintf(p.out, "turn %s\n", p.id)
	}
	out := p.out
	switch ev := m.GetEvent().(type) {
	case *exprdv1.AgentLoopRunResponse_StepStarted:
		p.endTextLocked()
		fmt.Fprintf(out, "step %d\n", ev.StepStarted.GetStep())
	case *exprdv1.AgentLoopRunResponse_TextDelta:
		if !p.inText {
			fmt.Fprint(out, "text ")
			p.inText = true
		}
		fmt.Fprint(out, ev.TextDelta.GetText())
	case *exprdv1.AgentLoopRunResponse_ToolCallRequested:
		p.endTextLocked()
		call := ev.ToolCallRequested.GetCall()
		if ev.ToolCallRequested.GetRunOnClient() {
			fmt.Fprintf(out, "run %s\n", call.GetName())
		} else {
			fmt.Fprintf(out, "call %s %s\n", call.GetName(), compactJSON(call.GetArgumentsJson()))
		}
	case *exprdv1.AgentLoopRunResponse_StateWrite:
		p.endTextLocked()
		fmt.Fprintf(out, "write path=%s value=%s\n", ev.StateWrite.GetPath(), ev.StateWrite.GetValueJson())
	case *exprdv1.AgentLoopRunResponse_ToolResult:
		p.endTextLocked()
		r := ev.ToolResult
		kind := "result"
		if r.GetIsError() {
			kind = "error"
		}
		fmt.Fprintf(out, "%s %s %s\n", kind, r.GetName(), compactJSON(r.GetOutputJson()))
	case *exprdv1.AgentLoopRunResponse_StepFinished:
		p.endTextLocked()
		s := ev.StepFinished
		fmt.Fprintf(out, "step %d finished: %s, %d tokens\n", s.GetStep(), s.GetFinishReason(), s.GetUsage().GetTotalTokens())
	case *exprdv1.AgentLoopRunResponse_Durability:
		p.endTextLocked()
		if ev.Durability.GetDurable() {
			fmt.Fprintln(out, "durable again: what the turn kept is recorded")
		} else {
			fmt.Fprintf(out, "not durable: %s\n", ev.Durability.GetReason())
		}
	case *exprdv1.AgentLoopRunResponse_Done:
		p.endTextLocked()
		d := ev.Done
		fmt.Fprintf(out, "done: %s after %d steps, %d tokens\n%s\n", stopReasonName(d.GetStopReason()), len(d.GetSteps()), d.GetUsage().GetTotalTokens(), d.GetText())
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
