package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
)

const (
	// chain adds, then multiplies: {"result": 36}.
	chain      = `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7}); codemode.CallTool("math.multiply", {"a": r1.result, "b": 3})`
	chainTools = "math.add,math.multiply"
	chainOut   = "start math.add {\"a\":5,\"b\":7}\nend math.add ok in D\nstart math.multiply {\"a\":12,\"b\":3}\nend math.multiply ok in D\nvalue {\"result\":36}\n"
	// restock streams two chunks, then asks for math.add's approval.
	restockThenAdd = `let c = codemode.CallToolStream("catalog.restock", {"id": "p01", "times": 2}); codemode.CallTool("math.add", {"a": len(c), "b": 1})`
	restockChunks  = "chunk catalog.restock {\"added\":5,\"event\":1,\"id\":\"p01\"}\nchunk catalog.restock {\"added\":5,\"event\":2,\"id\":\"p01\"}\n"
)

// durations are the times of the human output, which vary run to run.
var durations = regexp.MustCompile(` in [0-9.]+(ns|µs|ms|s)\b`)

// runNormalized is runCmd with the durations of stdout replaced by "D".
func runNormalized(stdin string, args ...string) result {
	r := runCmd(stdin, args...)
	r.stdout = durations.ReplaceAllString(r.stdout, " in D")
	return r
}

func TestCodemodeRun(t *testing.T) {
	t.Parallel()
	addr := startTools(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	chainFile := write("chain.expr", chain)
	emptyFile := write("empty.expr", " \n")
	for _, tc := range []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string // exactly, or its start when it does not end a line
		anyStdout  bool
		wantStderr string // a part of stderr
	}{
		{
			name:       "--code: each call's start and end, then the value",
			args:       []string{"--code", chain, "--tools", chainTools},
			wantStdout: chainOut,
		},
		{
			name:       "from a file",
			args:       []string{chainFile, "--tools", chainTools},
			wantStdout: chainOut,
		},
		{
			name:       "from stdin",
			stdin:      chain,
			args:       []string{"--tools", chainTools, "-"},
			wantStdout: chainOut,
		},
		{
			name:       "a streaming tool's chunks",
			args:       []string{"--code", `codemode.CallToolStream("catalog.restock", {"id": "p01", "times": 2})`, "--tools", "catalog.restock"},
			wantStdout: "start catalog.restock {\"id\":\"p01\",\"times\":2}\n" + restockChunks + "end catalog.restock ok in D\nvalue [{\"added\":5,\"event\":1,\"id\":\"p01\"},{\"added\":5,\"event\":2,\"id\":\"p01\"}]\n",
		},
		{
			name:       "a value without tools",
			args:       []string{"--code", "let x = 2; x * 21"},
			wantStdout: "value 42\n",
		},
		{
			name:       "an approval answered y",
			stdin:      "y\n",
			args:       []string{"--code", chain, "--tools", chainTools, "--needs-approval", "math.multiply"},
			wantStdout: chainOut,
			wantStderr: `approve math.multiply {"a":12,"b":3}? [y/N] `,
		},
		{
			name:       "an approval answered n",
			stdin:      "n\n",
			args:       []string{"--code", chain, "--tools", chainTools, "--needs-approval", "math.multiply"},
			wantCode:   exitError,
			wantStdout: "start math.add {\"a\":5,\"b\":7}\nend math.add ok in D\nstart math.multiply {\"a\":12,\"b\":3}\nend math.multiply rejected in D: ",
			wantStderr: `exprctl codemode run: host-function at line 1, column `,
		},
		{
			name:       "an approval at the end of stdin is rejected",
			args:       []string{"--code", chain, "--tools", chainTools, "--needs-approval", "math.multiply"},
			wantCode:   exitError,
			wantStdout: "start math.add {\"a\":5,\"b\":7}\nend math.add ok in D\nstart math.multiply {\"a\":12,\"b\":3}\nend math.multiply rejected in D: the call was rejected\n",
			wantStderr: `tool "math.multiply": the call was rejected`,
		},
		{
			name:       "--yes approves without asking",
			args:       []string{"--code", chain, "--tools", chainTools, "--needs-approval", "math.add,math.multiply", "--yes"},
			wantStdout: chainOut,
			wantStderr: "approve math.add {\"a\":5,\"b\":7}? [y/N] y (--yes)\napprove math.multiply {\"a\":12,\"b\":3}? [y/N] y (--yes)\n",
		},
		{
			name:       "--no rejects without asking",
			stdin:      "y\n",
			args:       []string{"--code", chain, "--tools", chainTools, "--needs-approval", "math.add", "--no"},
			wantCode:   exitError,
			wantStdout: "start math.add {\"a\":5,\"b\":7}\nend math.add rejected in D: ",
			wantStderr: "approve math.add {\"a\":5,\"b\":7}? [y/N] n (--no)\n",
		},
		{
			name:       "a program error: a tool's failure",
			args:       []string{"--code", `codemode.CallTool("math.divide", {"a": 1, "b": 0})`, "--tools", "math.divide"},
			wantCode:   exitError,
			wantStdout: "start math.divide {\"a\":1,\"b\":0}\nend math.divide error in D: ",
			wantStderr: `exprctl codemode run: host-function at line 1, column 10: tool "math.divide" failed: tool "math.divide": provider answered 422 Unprocessable Entity: {"code":"division_by_zero"}` + "\n",
		},
		{
			name:       "a program error: a tool off the whitelist",
			args:       []string{"--code", `codemode.CallTool("math.sqrt", {"a": 2})`, "--tools", "math.add"},
			wantCode:   exitError,
			wantStderr: `exprctl codemode run: unknown-reference at line 1, column 19: tool "math.sqrt" is not allowed here` + "\n",
		},
		{
			name:       "a program error: syntax",
			args:       []string{"--code", "1 +"},
			wantCode:   exitError,
			wantStderr: "exprctl codemode run: expression-syntax at line 1, column 3: unexpected token EOF\n",
		},
		{
			name:       "a program error: over the time budget",
			args:       []string{"--code", `codemode.CallToolStream("catalog.restock", {"id": "p01", "times": 1000})`, "--tools", "catalog.restock", "--timeout-ms", "30"},
			wantCode:   exitError,
			anyStdout:  true, // how far the stream got varies
			wantStderr: "exprctl codemode run: budget-exceeded: the run is over its time budget of 30ms\n",
		},
		{
			name:       "a prompt on a server without models",
			args:       []string{"--prompt", "Add 5 and 7"},
			wantCode:   exitError,
			wantStderr: "exprctl codemode run: FailedPrecondition: this server has no model providers configured",
		},
		{
			name:       "no program",
			wantCode:   exitUsage,
			wantStderr: "exprctl codemode run: give the program as FILE, - (stdin) or --code, or a --prompt",
		},
		{
			name:       "a file and --code",
			args:       []string{chainFile, "--code", chain},
			wantCode:   exitUsage,
			wantStderr: "FILE, --code and --prompt exclude each other",
		},
		{
			name:       "two files",
			args:       []string{chainFile, chainFile},
			wantCode:   exitUsage,
			wantStderr: "unexpected argument",
		},
		{
			name:       "a missing file",
			args:       []string{filepath.Join(dir, "missing.expr")},
			wantCode:   exitUsage,
			wantStderr: "reading the program: open ",
		},
		{
			name:       "an empty file",
			args:       []string{emptyFile},
			wantCode:   exitUsage,
			wantStderr: "is empty",
		},
		{
			name:       "the program on stdin, approvals asked there",
			stdin:      chain,
			args:       []string{"-", "--needs-approval", "math.add"},
			wantCode:   exitUsage,
			wantStderr: "add --yes or --no",
		},
		{
			name:       "--tools with --prompt",
			args:       []string{"--prompt", "Add 5 and 7", "--tools", "math.add"},
			wantCode:   exitUsage,
			wantStderr: "--tools is for code",
		},
		{
			name:       "--provider with code",
			args:       []string{"--code", "1", "--provider", "demo"},
			wantCode:   exitUsage,
			wantStderr: "--provider is for --prompt",
		},
		{
			name:       "--yes and --no",
			args:       []string{"--code", "1", "--yes", "--no"},
			wantCode:   exitUsage,
			wantStderr: "contradict",
		},
		{
			name:       "--timeout-ms too large",
			args:       []string{"--code", "1", "--timeout-ms", "4294967296"},
			wantCode:   exitUsage,
			wantStderr: "--timeout-ms 4294967296 is too large",
		},
		{
			name:       "an unknown flag",
			args:       []string{"--code", "1", "--frobnicate"},
			wantCode:   exitUsage,
			wantStderr: "flag provided but not defined: -frobnicate",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runNormalized(tc.stdin, append([]string{"--addr", addr, "codemode", "run"}, tc.args...)...)
			if tc.anyStdout {
				got.stdout = ""
			}
			check(t, got, tc.wantCode, tc.wantStdout, tc.wantStderr)
		})
	}
}

// event is a line of codemode run --json, every field any event has.
type event struct {
	Event      string          `json:"event"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	Chunk      json.RawMessage `json:"chunk"`
	ApprovalID string          `json:"approval_id"`
	Approved   *bool           `json:"approved"`
	DurationMs *float64        `json:"duration_ms"`
	Outcome    string          `json:"outcome"`
	Error      json.RawMessage `json:"error"`
	Value      json.RawMessage `json:"value"`
	Tools      []string        `json:"tools"`
	Code       string          `json:"code"`
	NotHandled bool            `json:"not_handled"`
}

// events parses --json output back, one event a line.
func events(t *testing.T, stdout string) []event {
	t.Helper()
	var out []event
	for line := range strings.Lines(stdout) {
		var e event
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// summary is an event in a few words: "tool_call_finished math.add ok".
func (e event) summary() string {
	parts := []string{e.Event}
	switch e.Event {
	case "tool_call_started", "approval_request":
		parts = append(parts, e.Tool, string(e.Arguments))
	case "chunk":
		parts = append(parts, e.Tool, string(e.Chunk))
	case "tool_call_finished":
		parts = append(parts, e.Tool, e.Outcome)
	case "approval_reply":
		if e.Approved != nil {
			parts = append(parts, map[bool]string{true: "approved", false: "rejected"}[*e.Approved])
		}
	case "plan":
		parts = append(parts, strings.Join(e.Tools, ","))
	case "result":
		parts = append(parts, string(e.Value), string(e.Error))
		if e.NotHandled {
			parts = append(parts, "not handled")
		}
	}
	return strings.TrimSpace(strings.Join(parts, " "))
}

func TestCodemodeRunJSON(t *testing.T) {
	t.Parallel()
	addr := startTools(t)
	for _, tc := range []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		// want are the events in order; an approval's request and reply
		// may come before its call's start (the server sends the two at
		// once), so those are compared apart.
		want         []string
		wantApproval []string
	}{
		{
			name: "a chain",
			args: []string{"--code", chain, "--tools", chainTools},
			want: []string{
				`tool_call_started math.add {"a":5,"b":7}`, "tool_call_finished math.add ok",
				`tool_call_started math.multiply {"a":12,"b":3}`, "tool_call_finished math.multiply ok",
				`result {"result":36}`,
			},
		},
		{
			name: "an approval answered y",
			// The answer may carry spaces and capitals.
			stdin: " Yes \n",
			args:  []string{"--code", chain, "--tools", chainTools, "--needs-approval", "math.multiply"},
			want: []string{
				`tool_call_started math.add {"a":5,"b":7}`, "tool_call_finished math.add ok",
				`tool_call_started math.multiply {"a":12,"b":3}`, "tool_call_finished math.multiply ok",
				`result {"result":36}`,
			},
			wantApproval: []string{`approval_request math.multiply {"a":12,"b":3}`, "approval_reply approved"},
		},
		{
			name:     "an approval answered n",
			stdin:    "n\n",
			args:     []string{"--code", chain, "--tools", chainTools, "--needs-approval", "math.add"},
			wantCode: exitError,
			want: []string{
				`tool_call_started math.add {"a":5,"b":7}`, "tool_call_finished math.add rejected",
				`result  {"reason":"host-function","message":"tool \"math.add\": the call was rejected (line 1, column 19)","line":1,"column":19}`,
			},
			wantApproval: []string{`approval_request math.add {"a":5,"b":7}`, "approval_reply rejected"},
		},
		{
			name: "a streaming tool",
			args: []string{"--code", `len(codemode.CallToolStream("catalog.restock", {"id": "p01", "times": 2}))`, "--tools", "catalog.restock"},
			want: []string{
				`tool_call_started catalog.restock {"id":"p01","times":2}`,
				`chunk catalog.restock {"added":5,"event":1,"id":"p01"}`, `chunk catalog.restock {"added":5,"event":2,"id":"p01"}`,
				"tool_call_finished catalog.restock ok", "result 2",
			},
		},
		{
			name:     "a program error",
			args:     []string{"--code", "1 +"},
			wantCode: exitError,
			want:     []string{`result  {"reason":"expression-syntax","message":"unexpected token EOF (line 1, column 3)","line":1,"column":3}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runCmd(tc.stdin, append([]string{"--addr", addr, "codemode", "run", "--json"}, tc.args...)...)
			if got.code != tc.wantCode {
				t.Errorf("got exit code %d, want %d (stderr %q)", got.code, tc.wantCode, got.stderr)
			}
			evs := events(t, got.stdout)
			var rest, approval []string
			for i, e := range evs {
				switch e.Event {
				case "approval_request", "approval_reply":
					approval = append(approval, e.summary())
					if e.ApprovalID == "" {
						t.Errorf("event %d %s has no approval_id", i, e.Event)
					}
				default:
					rest = append(rest, e.summary())
				}
				if e.Event == "tool_call_finished" && (e.DurationMs == nil || *e.DurationMs < 0) {
					t.Errorf("event %d: got duration_ms %v, want one >= 0", i, e.DurationMs)
				}
			}
			if !slices.Equal(rest, tc.want) {
				t.Errorf("got events\n%s\nwant\n%s", strings.Join(rest, "\n"), strings.Join(tc.want, "\n"))
			}
			if !slices.Equal(approval, tc.wantApproval) {
				t.Errorf("got approval events %q, want %q", approval, tc.wantApproval)
			}
		})
	}
}

// TestCodemodeRunPrintsChunksAsTheyArrive: a stream's chunks are on stdout
// while the run still goes on: here, when it waits for the approval of the
// call after the stream, which is answered only once they are seen.
func TestCodemodeRunPrintsChunksAsTheyArrive(t *testing.T) {
	t.Parallel()
	addr := startTools(t)
	for _, jsonOut := range []bool{false, true} {
		t.Run(map[bool]string{false: "text", true: "json"}[jsonOut], func(t *testing.T) {
			t.Parallel()
			wantChunks := restockChunks
			args := []string{"--addr", addr, "codemode", "run", "--code", restockThenAdd, "--tools", "catalog.restock,math.add", "--needs-approval", "math.add"}
			if jsonOut {
				args = append(args, "--json")
				wantChunks = `{"event":"chunk","tool":"catalog.restock","chunk":{"added":5,"event":1,"id":"p01"}}` + "\n" +
					`{"event":"chunk","tool":"catalog.restock","chunk":{"added":5,"event":2,"id":"p01"}}` + "\n"
			}
			stdinR, stdinW := io.Pipe()
			var stdout, stderr watchedBuffer
			ctx, cancel := context.WithCancel(context.Background())
			finished := make(chan struct{})
			code := -1
			go func() {
				defer close(finished)
				code = runContext(ctx, args, stdinR, &stdout, &stderr)
			}()
			defer func() {
				// On a failure, interrupt the run, and let the read of
				// stdin end.
				cancel()
				<-finished
				_ = stdinW.Close()
			}()
			if !stderr.waitFor(`approve math.add {"a":2,"b":1}? [y/N] `, finished) {
				t.Fatalf("the run ended (exit %d) without asking for the approval; stderr:\n%s", code, stderr.String())
			}
			// The run waits for the answer: what it printed so far is
			// what was printed as it arrived.
			if got := stdout.String(); !strings.Contains(got, wantChunks) {
				t.Fatalf("got stdout\n%s\nwhile the run waits for the approval, want the chunks in it:\n%s", got, wantChunks)
			}
			if _, err := io.WriteString(stdinW, "y\n"); err != nil {
				t.Fatal(err)
			}
			<-finished
			if code != exitOK || !strings.Contains(stdout.String(), `{"result":3}`) {
				t.Errorf("got exit %d and\n%s\nwant 0 and the value {\"result\":3}; stderr:\n%s", code, stdout.String(), stderr.String())
			}
		})
	}
}

// An interrupt (Ctrl-C) while the run waits sends RunCancel: the server's
// result says the run was cancelled.
func TestCodemodeRunInterrupted(t *testing.T) {
	t.Parallel()
	addr := startTools(t)
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout, stderr watchedBuffer
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	finished := make(chan struct{})
	code := -1
	go func() {
		defer close(finished)
		code = runContext(ctx, []string{"--addr", addr, "codemode", "run", "--code", chain, "--tools", chainTools, "--needs-approval", "math.add"}, stdinR, &stdout, &stderr)
	}()
	if !stderr.waitFor("approve math.add", finished) {
		t.Fatalf("the run ended (exit %d) without asking for the approval; stderr:\n%s", code, stderr.String())
	}
	interrupt()
	<-finished
	got := result{code, durations.ReplaceAllString(stdout.String(), " in D"), stderr.String()}
	check(t, got, exitError, "start math.add {\"a\":5,\"b\":7}\nend math.add cancelled in D", "exprctl codemode run: the run was cancelled\n")
}

// watchedBuffer is a buffer one can wait on for a text to appear.
type watchedBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{} // closed and replaced on each write
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
	return w.b.Write(p)
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitFor reports whether s appeared before stop was closed.
func (w *watchedBuffer) waitFor(s string, stop <-chan struct{}) bool {
	for {
		w.mu.Lock()
		if strings.Contains(w.b.String(), s) {
			w.mu.Unlock()
			return true
		}
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-stop:
			return false
		}
	}
}

// The demo's model cannot plan (it knows one question, about products):
// its failure is told clearly. A model that plans is run end to end.
func TestCodemodeRunPrompt(t *testing.T) {
	t.Parallel()
	plan := `{"tools": ["math.add"], "code": "codemode.Get(codemode.CallTool(\"math.add\", {\"a\": 2, \"b\": 3}), \"result\")", "stream": false}`
	addr := startTools(t, withModels(t, map[string]scripted.Script{
		"planner": {Loop: true, Turns: []scripted.Turn{
			{Match: &scripted.Match{LastUser: "plus"}, Text: plan},
			{Match: &scripted.Match{LastUser: "hello"}, Text: `{"handled": false}`},
		}},
		"demo": scripted.DemoScript(),
	}))
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name: "a plan, run",
			args: []string{"--prompt", "What is 2 plus 3?", "--provider", "planner"},
			wantStdout: "plan tools=math.add stream=false\n" +
				`  codemode.Get(codemode.CallTool("math.add", {"a": 2, "b": 3}), "result")` + "\n" +
				"start math.add {\"a\":2,\"b\":3}\nend math.add ok in D\nvalue 5\n",
		},
		{
			name: "a plan, run, as JSON",
			args: []string{"--prompt", "What is 2 plus 3?", "--provider", "planner", "--json"},
			wantStdout: `{"event":"plan","tools":["math.add"],"code":"codemode.Get(codemode.CallTool(\"math.add\", {\"a\": 2, \"b\": 3}), \"result\")","stream":false}` + "\n" +
				`{"event":"tool_call_started","tool":"math.add","arguments":{"a":2,"b":3}}` + "\n" +
				`{"event":"tool_call_finished","tool":"math.add","arguments":{"a":2,"b":3},"duration_ms":`,
		},
		{
			name:       "not handled",
			args:       []string{"--prompt", "Say hello.", "--provider", "planner"},
			wantStdout: "not handled: the model said no tool is needed\n",
		},
		{
			name:       "not handled, as JSON",
			args:       []string{"--prompt", "Say hello.", "--provider", "planner", "--json"},
			wantStdout: `{"event":"result","not_handled":true}` + "\n",
		},
		{
			name: "the demo's model plans a chain",
			args: []string{"--prompt", "add 5 and 7, then multiply the sum by 3", "--provider", "demo"},
			wantStdout: "plan tools=math.add,math.multiply stream=false\n" +
				`  let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});` + "\n" +
				`  codemode.CallTool("math.multiply", {"a": codemode.Get(r1, "result"), "b": 3})` + "\n" +
				"start math.add {\"a\":5,\"b\":7}\nend math.add ok in D\nstart math.multiply {\"a\":12,\"b\":3}\nend math.multiply ok in D\nvalue {\"result\":36}\n",
		},
		{
			name:       "an unknown provider",
			args:       []string{"--prompt", "Add 5 and 7", "--provider", "nope"},
			wantCode:   exitError,
			wantStderr: `exprctl codemode run: InvalidArgument: start.provider: unknown model provider "nope"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runNormalized("", append([]string{"--addr", addr, "codemode", "run"}, tc.args...)...)
			check(t, got, tc.wantCode, tc.wantStdout, tc.wantStderr)
		})
	}
}

// A Rejected event is told with its status's code and message, and
// --json names its fields.
func TestPrintRejected(t *testing.T) {
	t.Parallel()
	r := &exprdv1.Rejected{Kind: "approval_reply", CallId: "a1",
		Status: status.New(codes.NotFound, `no approval is waiting for "a1"`).Proto()}
	for _, tc := range []struct {
		name string
		json bool
		want string
	}{
		{"text", false, `the server rejected the approval_reply: NotFound: no approval is waiting for "a1"` + "\n"},
		{"json", true, `{"event":"rejected","kind":"approval_reply","call_id":"a1","code":"NotFound","message":"no approval is waiting for \"a1\""}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			printRejected(&output{w: &b, json: tc.json}, r)
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}
