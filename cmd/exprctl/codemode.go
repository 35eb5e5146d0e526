package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// codemodeRunCmd runs a program, or a model's plan for a prompt, on a
// CodeMode Run stream and prints its events as they arrive.
func codemodeRunCmd(e *env, args []string) error {
	fs := e.newFlagSet("codemode run")
	withUsage(fs, "(FILE | - | --code CODE | --prompt TEXT) [flags]")
	code := fs.String("code", "", "the program (or give it as FILE, or - for stdin)")
	prompt := fs.String("prompt", "", "what to do, for a model to plan with the registry's tools")
	provider := fs.String("provider", "", "the model provider for --prompt (empty: the server's default)")
	var tools, approval listFlag
	fs.Var(&tools, "tools", "the whitelist: the `TOOLS` the program may call, by full name (A,B or repeated)")
	fs.Var(&approval, "needs-approval", "`TOOLS` whose every call waits for a y/N answer on the terminal (A,B or repeated)")
	timeoutMs := fs.Uint("timeout-ms", 0, "the run's time budget in milliseconds, tool calls and approvals included (0: the server's default, 30000)")
	yes := fs.Bool("yes", false, "approve every call without asking")
	no := fs.Bool("no", false, "reject every call without asking")
	out := &output{w: e.stdout}
	out.registerJSON(fs)
	pos, err := parseArgs(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if *yes && *no {
		return usagef("--yes and --no contradict each other")
	}
	timeout, err := uint32Flag("timeout-ms", *timeoutMs)
	if err != nil {
		return err
	}
	start := &exprdv1.RunStart{Tools: tools, TimeoutMs: timeout, NeedsApproval: approval, Provider: *provider}
	var file string
	if len(pos) == 1 {
		file = pos[0]
	}
	switch given := countSet(file != "", *code != "", *prompt != ""); {
	case given == 0:
		return usagef("give the program as FILE, - (stdin) or --code, or a --prompt for a model to plan")
	case given > 1:
		return usagef("FILE, --code and --prompt exclude each other")
	case *prompt != "":
		if len(tools) > 0 {
			return usagef("--tools is for code: a prompt's plan declares its own tools")
		}
		start.Source = &exprdv1.RunStart_Prompt{Prompt: *prompt}
	default:
		if *provider != "" {
			return usagef("--provider is for --prompt")
		}
		src, err := e.program(file, *code, len(approval) > 0 && !*yes && !*no)
		if err != nil {
			return err
		}
		start.Source = &exprdv1.RunStart_Code{Code: src}
	}

	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return e.codemodeRun(c, start, out, newTerminal(e.stdin, e.stderr, *yes, *no))
}

func countSet(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

// program is the code of --code, FILE, or stdin for "-". Approvals are
// answered on stdin, so a program read from it leaves nobody to ask.
func (e *env) program(file, code string, asks bool) (string, error) {
	var b []byte
	var err error
	switch file {
	case "":
		return code, nil
	case "-":
		if asks {
			return "", usagef("- reads the program from stdin, where approvals are answered: add --yes or --no")
		}
		b, err = io.ReadAll(e.stdin)
	default:
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", usagef("reading the program: %v", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", usagef("the program in %s is empty", file)
	}
	return string(b), nil
}

// codemodeRun sends start on a Run stream, prints each event as it
// arrives, answers approvals on the terminal, and returns with the result:
// nil for a value, a programError for a program that failed.
func (e *env) codemodeRun(c *client.Client, start *exprdv1.RunStart, out *output, term *terminal) error {
	// The stream outlives an interrupt by up to client.CancelWait: Ctrl-C
	// sends RunCancel, and the server's result says what the run had done.
	ctx, cancel := context.WithCancel(context.WithoutCancel(e.ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	stream, err := c.CodeMode().Run(ctx)
	if err != nil {
		return err
	}
	var sendMu sync.Mutex
	send := func(m *exprdv1.RunRequest) {
		sendMu.Lock()
		defer sendMu.Unlock()
		// A failed send means the stream has ended: Recv says how.
		_ = stream.Send(m)
	}
	send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: start}})
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-e.ctx.Done():
		}
		send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Cancel{Cancel: &exprdv1.RunCancel{}}})
		t := time.NewTimer(client.CancelWait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			cancel()
		}
	}()
	// A question still open when the result comes is given up.
	askCtx, stopAsking := context.WithCancel(ctx)
	defer stopAsking()

	for {
		m, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return errors.New("the server ended the run without a result")
		case err != nil && e.ctx.Err() != nil && status.Code(err) == codes.Canceled:
			return errors.New("interrupted: the server did not answer the cancel in time")
		case err != nil:
			return err
		}
		switch ev := m.GetEvent().(type) {
		case *exprdv1.RunResponse_Plan:
			printPlan(out, ev.Plan)
		case *exprdv1.RunResponse_ToolCallStarted:
			s := ev.ToolCallStarted
			out.object(callEvent{"tool_call_started", s.GetTool(), rawJSON(s.GetArgumentsJson())})
			out.textf("start %s %s\n", s.GetTool(), compactJSON(s.GetArgumentsJson()))
		case *exprdv1.RunResponse_Chunk:
			ch := ev.Chunk
			out.object(chunkEvent{"chunk", ch.GetTool(), rawJSON(ch.GetChunkJson())})
			out.textf("chunk %s %s\n", ch.GetTool(), compactJSON(ch.GetChunkJson()))
		case *exprdv1.RunResponse_ToolCallFinished:
			printFinished(out, ev.ToolCallFinished)
		case *exprdv1.RunResponse_ApprovalRequest:
			a := ev.ApprovalRequest
			out.object(approvalRequestEvent{"approval_request", a.GetApprovalId(), a.GetTool(), rawJSON(a.GetArgumentsJson())})
			// Asked on its own goroutine: the stream's events go on
			// printing, and a result ends the question.
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := term.ask(askCtx, fmt.Sprintf("approve %s %s?", a.GetTool(), compactJSON(a.GetArgumentsJson())))
				if err != nil {
					return
				}
				out.object(approvalReplyEvent{"approval_reply", a.GetApprovalId(), ok})
				send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_ApprovalReply{ApprovalReply: &exprdv1.ApprovalReply{ApprovalId: a.GetApprovalId(), Approved: ok}}})
			}()
		case *exprdv1.RunResponse_Rejected:
			// A reply that came too late changed nothing: the run goes on.
			printRejected(out, ev.Rejected)
		case *exprdv1.RunResponse_Result:
			stopAsking()
			return printResult(out, ev.Result)
		}
	}
}

// The events of codemode run --json, one a line, named as the proto's
// RunResponse fields; JSON fields are inlined as JSON.
type (
	planEvent struct {
		Event  string   `json:"event"`
		Tools  []string `json:"tools"`
		Code   string   `json:"code"`
		Stream bool     `json:"stream"`
	}
	callEvent struct {
		Event     string          `json:"event"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}
	chunkEvent struct {
		Event string          `json:"event"`
		Tool  string          `json:"tool"`
		Chunk json.RawMessage `json:"chunk"`
	}
	approvalRequestEvent struct {
		Event      string          `json:"event"`
		ApprovalID string          `json:"approval_id"`
		Tool       string          `json:"tool"`
		Arguments  json.RawMessage `json:"arguments,omitempty"`
	}
	// approvalReplyEvent is exprctl's answer, as sent.
	approvalReplyEvent struct {
		Event      string `json:"event"`
		ApprovalID string `json:"approval_id"`
		Approved   bool   `json:"approved"`
	}
	finishedEvent struct {
		Event      string          `json:"event"`
		Tool       string          `json:"tool"`
		Arguments  json.RawMessage `json:"arguments,omitempty"`
		DurationMs float64         `json:"duration_ms"`
		Outcome    string          `json:"outcome"`
		Error      string          `json:"error,omitempty"`
	}
	rejectedEvent struct {
		Event   string `json:"event"`
		Kind    string `json:"kind"`
		CallID  string `json:"call_id,omitempty"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	resultEvent struct {
		Event      string          `json:"event"`
		Value      json.RawMessage `json:"value,omitempty"`
		Error      *codeErrorJSON  `json:"error,omitempty"`
		Cancelled  bool            `json:"cancelled,omitempty"`
		NotHandled bool            `json:"not_handled,omitempty"`
	}
	codeErrorJSON struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
		Line    uint32 `json:"line,omitempty"`
		Column  uint32 `json:"column,omitempty"`
	}
)

func printPlan(out *output, p *exprdv1.Plan) {
	out.object(planEvent{"plan", nonNil(p.GetTools()), p.GetCode(), p.GetStream()})
	out.textf("plan tools=%s stream=%t\n", strings.Join(p.GetTools(), ","), p.GetStream())
	for line := range strings.Lines(withNewline(p.GetCode())) {
		out.textf("  %s", line)
	}
}

func printFinished(out *output, f *exprdv1.ToolCallTrace) {
	d := time.Duration(f.GetDurationMs() * float64(time.Millisecond))
	outcome := outcomeName(f.GetOutcome())
	out.object(finishedEvent{"tool_call_finished", f.GetTool(), rawJSON(f.GetArgumentsJson()), f.GetDurationMs(), outcome, f.GetError()})
	if f.GetError() != "" {
		out.textf("end %s %s in %s: %s\n", f.GetTool(), outcome, roundDuration(d), f.GetError())
		return
	}
	out.textf("end %s %s in %s\n", f.GetTool(), outcome, roundDuration(d))
}

func printRejected(out *output, r *exprdv1.Rejected) {
	st := (&client.RejectedError{Rejected: r}).GRPCStatus()
	out.object(rejectedEvent{"rejected", r.GetKind(), r.GetCallId(), st.Code().String(), st.Message()})
	out.textf("%s\n", rejectedText(r))
}

// outcomeName is a trace's outcome as exprctl prints it: ok, error, ...
func outcomeName(o exprdv1.ToolCallTrace_Outcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}

// printResult prints the value, or returns why there is none.
func printResult(out *output, r *exprdv1.RunResult) error {
	ev := resultEvent{Event: "result", Cancelled: r.GetCancelled(), NotHandled: r.GetNotHandled()}
	if ce := r.GetError(); ce != nil {
		ev.Error = &codeErrorJSON{ce.GetReason(), ce.GetMessage(), ce.GetLine(), ce.GetColumn()}
	} else if !r.GetCancelled() && !r.GetNotHandled() {
		ev.Value = rawJSON(r.GetValueJson())
		if ev.Value == nil {
			ev.Value = json.RawMessage("null")
		}
	}
	out.object(ev)
	switch {
	case r.GetCancelled():
		return errors.New("the run was cancelled")
	case r.GetError() != nil:
		return programError{r.GetError()}
	case r.GetNotHandled():
		out.textf("not handled: the model said no tool is needed\n")
		return nil
	}
	out.textf("value %s\n", ev.Value)
	return nil
}

// programError is a CodeMode program's failure (exit 1): its reason, where
// in the code when known, and its message.
type programError struct{ e *exprdv1.CodeError }

func (p programError) Error() string {
	reason, msg := p.e.GetReason(), p.e.GetMessage()
	if p.e.GetLine() == 0 {
		return reason + ": " + msg
	}
	pos := fmt.Sprintf("line %d", p.e.GetLine())
	if p.e.GetColumn() > 0 {
		pos += fmt.Sprintf(", column %d", p.e.GetColumn())
	}
	// The message often ends with the position too: say it once.
	return fmt.Sprintf("%s at %s: %s", reason, pos, strings.TrimSuffix(msg, " ("+pos+")"))
}

// roundDuration keeps a duration's three or so significant digits.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// nonNil makes a missing list [] rather than null in JSON.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
