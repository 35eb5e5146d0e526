package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startDemo serves exprd like `exprd --demo`, without its tool providers,
// on a loopback port for the test.
func startDemo(t *testing.T) string {
	t.Helper()
	srv, err := server.New(server.WithLogger(slog.New(slog.DiscardHandler)), server.WithInitialState(demo.Products), server.WithFunctions(demo.Functions(slog.New(slog.DiscardHandler))...))
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, srv)
}

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(stdin string, args ...string) result {
	var stdout, stderr strings.Builder
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

const (
	fiveLowest      = `{"steps": [{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}]}`
	fiveLowestWrite = `write step=0 path=scopes.root.selected value={"p02":true,"p03":true,"p08":true,"p15":true,"p17":true}` + "\n"
	confirmB        = `{"steps": [{"set": "scopes.root.a", "expr": "1"}, {"set": "scopes.root.b", "expr": "2", "confirm": "Set b?"}]}`
	csvOfSelected   = `{"steps": [
		{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:2], [.id, true]))"},
		{"expr": "downloadCsv({rows: map(filter(scopes.root.products.items, .id in scopes.root.selected), ({id: .id, name: .name, usd: convertPrice({amount: .price, to: 'USD'})}))})"}]}`
	csvRows = "id,name,usd\np02,Notebook,11.39\np03,Pen set,9.55\n"
)

func TestExpr(t *testing.T) {
	t.Parallel()
	addr := startDemo(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	if err := os.WriteFile(state, []byte(`{"items": [{"id": "a", "price": 2}, {"id": "b", "price": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string // a part of stderr
	}{
		{
			name:       "five lowest priced",
			args:       []string{"--call", fiveLowest},
			wantStdout: fiveLowestWrite + "answer {}\n",
		},
		{
			name:       "five lowest priced with read",
			args:       []string{"--read", "--call", `{"steps": [{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}], "read": "len(scopes.root.selected)"}`},
			wantStdout: fiveLowestWrite + "answer {\"value\":5}\n",
		},
		{
			name:       "confirm declined with --no",
			args:       []string{"--no", "--call", confirmB},
			wantStdout: "write step=0 path=scopes.root.a value=1\nanswer {\"declined\":true}\n",
			wantStderr: "confirm: Set b? [y/N] n (--no)",
		},
		{
			name:       "confirm accepted with --yes",
			args:       []string{"--yes", "--call", confirmB},
			wantStdout: "write step=0 path=scopes.root.a value=1\nwrite step=1 path=scopes.root.b value=2\nanswer {}\n",
		},
		{
			name:       "confirm accepted on the terminal",
			stdin:      "y\n",
			args:       []string{"--call", confirmB},
			wantStdout: "write step=0 path=scopes.root.a value=1\nwrite step=1 path=scopes.root.b value=2\nanswer {}\n",
			wantStderr: "confirm: Set b? [y/N] ",
		},
		{
			name:       "confirm declined at the end of stdin",
			args:       []string{"--call", confirmB},
			wantStdout: "write step=0 path=scopes.root.a value=1\nanswer {\"declined\":true}\n",
			wantStderr: "confirm: Set b? [y/N] ",
		},
		{
			name:       "downloadCsv to stdout",
			args:       []string{"--server-fn", "convertPrice", "--client-fn", "downloadCsv", "--call", csvOfSelected},
			wantStdout: `write step=0 path=scopes.root.selected value={"p02":true,"p03":true}` + "\n" + csvRows + "answer {}\n",
		},
		{
			name:       "server function",
			args:       []string{"--read", "--server-fn", "convertPrice,notify", "--call", `{"steps": [{"expr": "notify({message: 'hi'})"}], "read": "convertPrice({amount: 10, to: 'USD'})"}`},
			wantStdout: "answer {\"value\":10.8}\n",
		},
		{
			name:       "state file replaces the demo state",
			args:       []string{"--state", state, "--read", "--call", `{"read": "map(sortBy(scopes.root.items, .price), .id)"}`},
			wantStdout: "answer {\"value\":[\"b\",\"a\"]}\n",
		},
		{
			name:       "an error answer is an answer",
			args:       []string{"--call", `{"stepz": []}`},
			wantStdout: "answer {\"error\":{\"message\":",
		},
		{
			name:       "bad --call JSON",
			args:       []string{"--call", `{"steps": [`},
			wantCode:   exitUsage,
			wantStderr: "exprctl expr: --call is not valid JSON: unexpected end of JSON input",
		},
		{
			name:       "no --call",
			wantCode:   exitUsage,
			wantStderr: "--call is required",
		},
		{
			name:       "--yes and --no",
			args:       []string{"--yes", "--no", "--call", fiveLowest},
			wantCode:   exitUsage,
			wantStderr: "contradict",
		},
		{
			name:       "client function exprctl cannot run",
			args:       []string{"--client-fn", "sendMail", "--call", fiveLowest},
			wantCode:   exitUsage,
			wantStderr: "exprctl runs only downloadCsv",
		},
		{
			name:       "state file not an object",
			args:       []string{"--state", filepath.Join(dir, "missing.json"), "--call", fiveLowest},
			wantCode:   exitUsage,
			wantStderr: "--state",
		},
		{
			name:       "unknown server function",
			args:       []string{"--server-fn", "bogus", "--call", fiveLowest},
			wantCode:   exitError,
			wantStderr: `exprctl expr: InvalidArgument: settings.functions[0].server_name: the server has no function "bogus"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runCmd(tc.stdin, append([]string{"--addr", addr, "expr"}, tc.args...)...)
			check(t, got, tc.wantCode, tc.wantStdout, tc.wantStderr)
		})
	}
}

// A state the session refuses is told after the answer, which the call
// gave on the state before it, with the status's code and message.
func TestExprStateRejected(t *testing.T) {
	t.Parallel()
	srv, err := server.New(server.WithLogger(slog.New(slog.DiscardHandler)), server.WithMaxStateBytes(64))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	state := filepath.Join(t.TempDir(), "products.json")
	if err := os.WriteFile(state, demo.Products, 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCmd("", "--addr", addr, "expr", "--state", state, "--read", "--call", `{"read": "len(scopes.root)"}`)
	check(t, got, exitError, "answer {\"value\":0}\n", "exprctl expr: the server rejected the state: ResourceExhausted: ")
}

// JSON that is not UTF-8 cannot go in a proto string: a usage error.
func TestNotUTF8(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\"a\": \"\xff\"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, wantStderr string
		args             []string
	}{
		{"--call", "exprctl call: --call is not valid JSON: not UTF-8 text", []string{"call", "--call", "@" + bad}},
		{"--state", "exprctl expr: --state " + bad + " is not valid JSON: not UTF-8 text", []string{"expr", "--state", bad, "--call", "{}"}},
		{"a manual", "exprctl tools register: --file " + bad + ": not UTF-8 text", []string{"tools", "register", "x", "--file", bad}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// No server: a usage error is found before dialling.
			check(t, runCmd("", append([]string{"--addr", closedAddr(t)}, tc.args...)...), exitUsage, "", tc.wantStderr)
		})
	}
}

// check compares a run's outcome: stdout exactly, or by prefix when the
// wanted text does not end a line; stderr by substring.
func check(t *testing.T, got result, wantCode int, wantStdout, wantStderr string) {
	t.Helper()
	if got.code != wantCode {
		t.Errorf("got exit code %d, want %d (stderr %q)", got.code, wantCode, got.stderr)
	}
	if strings.HasSuffix(wantStdout, "\n") || wantStdout == "" {
		if got.stdout != wantStdout {
			t.Errorf("got stdout\n%s\nwant\n%s", got.stdout, wantStdout)
		}
	} else if !strings.HasPrefix(got.stdout, wantStdout) {
		t.Errorf("got stdout\n%s\nwant it to start with\n%s", got.stdout, wantStdout)
	}
	if !strings.Contains(got.stderr, wantStderr) {
		t.Errorf("got stderr %q, want it to contain %q", got.stderr, wantStderr)
	}
}

func TestExprCSVOut(t *testing.T) {
	t.Parallel()
	addr := startDemo(t)
	out := filepath.Join(t.TempDir(), "rows.csv")
	got := runCmd("", "expr", "--addr", addr, "--server-fn", "convertPrice", "--client-fn", "downloadCsv", "--csv-out", out, "--call", csvOfSelected)
	check(t, got, exitOK, `write step=0 path=scopes.root.selected value={"p02":true,"p03":true}`+"\nanswer {}\n", "")
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != csvRows {
		t.Errorf("got CSV\n%s\nwant\n%s", b, csvRows)
	}
}

func TestWriteCSV(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, args, want string
		wantRows         int
		wantErr          bool
	}{
		{"union of keys", `{"rows": [{"b": 1, "a": "x,y"}, {"c": null, "a": true}]}`, "a,b,c\n\"x,y\",1,\ntrue,,\n", 2, false},
		{"nested values as JSON", `{"rows": [{"tags": ["a", "b"], "dim": {"w": 1}}]}`, "dim,tags\n\"{\"\"w\"\":1}\",\"[\"\"a\"\",\"\"b\"\"]\"\n", 1, false},
		{"no rows", `{"rows": []}`, "\n", 0, false},
		{"rows not objects", `{"rows": [1]}`, "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			n, err := writeCSV(&b, json.RawMessage(tc.args))
			if (err != nil) != tc.wantErr {
				t.Fatalf("got error %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if n != tc.wantRows || b.String() != tc.want {
				t.Errorf("got %d rows %q, want %d rows %q", n, b.String(), tc.wantRows, tc.want)
			}
		})
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	addr := startDemo(t)
	state := filepath.Join(t.TempDir(), "products.json")
	if err := os.WriteFile(state, demo.Products, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name:       "five lowest priced on a state file",
			args:       []string{"--state", state, "--call", fiveLowest},
			wantStdout: fiveLowestWrite + "answer {}\n",
		},
		{
			name:       "no state: empty",
			args:       []string{"--read", "--call", `{"read": "scopes.root"}`},
			wantStdout: "answer {\"value\":{}}\n",
		},
		{
			name:       "confirm declined",
			args:       []string{"--call", confirmB},
			wantStdout: "write step=0 path=scopes.root.a value=1\nanswer {\"declined\":true}\n",
		},
		{
			name:       "client function refused",
			args:       []string{"--client-fn", "downloadCsv", "--call", `{"steps": [{"expr": "downloadCsv({rows: []})"}]}`},
			wantStdout: "answer {\"error\":{\"message\":\"step 0: function \\\"downloadCsv\\\" cannot be called here",
		},
		{
			name:       "bad --call JSON",
			args:       []string{"--call", `steps`},
			wantCode:   exitUsage,
			wantStderr: "--call is not valid JSON",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runCmd("", append([]string{"--addr", addr, "call"}, tc.args...)...)
			check(t, got, tc.wantCode, tc.wantStdout, tc.wantStderr)
		})
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	addr := startDemo(t)
	inputProps := func(t *testing.T, stdout string) string {
		t.Helper()
		var s struct {
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("input schema %q: %v", stdout, err)
		}
		_, read := s.Properties["read"]
		_, steps := s.Properties["steps"]
		return map[[2]bool]string{{false, true}: "steps", {true, true}: "read steps"}[[2]bool{read, steps}]
	}
	t.Run("input schema", func(t *testing.T) {
		t.Parallel()
		got := runCmd("", "--addr", addr, "describe", "--part", "input-schema")
		if got.code != exitOK || inputProps(t, got.stdout) != "steps" {
			t.Errorf("got %d, %q; want the schema with steps only", got.code, got.stdout)
		}
	})
	t.Run("input schema with read", func(t *testing.T) {
		t.Parallel()
		got := runCmd("", "describe", "--addr", addr, "--read", "--part", "input-schema")
		if got.code != exitOK || inputProps(t, got.stdout) != "read steps" {
			t.Errorf("got %d, %q; want the schema with read and steps", got.code, got.stdout)
		}
	})
	t.Run("all parts", func(t *testing.T) {
		t.Parallel()
		got := runCmd("", "--addr", addr, "describe", "--note", "Be brief.", "--server-fn", "convertPrice", "--client-fn", "downloadCsv")
		if got.code != exitOK {
			t.Fatalf("got exit code %d (%s)", got.code, got.stderr)
		}
		for _, want := range []string{"name: expr\n", "==> description <==\n", "## Note\n\nBe brief.", "==> input-schema <==\n{\n",
			"==> output-schema <==\n", "==> core <==\n", "==> functions <==\n", "convertPrice", "Converts an amount in EUR", "downloadCsv"} {
			if !strings.Contains(got.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, got.stdout)
			}
		}
	})
	t.Run("bad part", func(t *testing.T) {
		t.Parallel()
		got := runCmd("", "--addr", addr, "describe", "--part", "schema")
		check(t, got, exitUsage, "", `--part "schema": want one of all|description|input-schema|output-schema|core|functions`)
	})
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no command", nil, exitUsage, "usage: exprctl"},
		{"unknown command", []string{"run"}, exitUsage, `unknown command "run"`},
		{"help", []string{"--help"}, exitOK, "usage: exprctl"},
		{"command help", []string{"expr", "--help"}, exitOK, "-timeout-ms"},
		{"unknown flag", []string{"expr", "--frobnicate"}, exitUsage, "flag provided but not defined: -frobnicate"},
		{"stray argument", []string{"describe", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"server unreachable", []string{"--addr", "127.0.0.1:1", "describe"}, exitError, "exprctl describe: the server at 127.0.0.1:1 could not be reached: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			check(t, runCmd("", tc.args...), tc.wantCode, "", tc.wantStderr)
		})
	}
}

// EXPRCTL_ADDR names the server when --addr is not given.
func TestAddrFromEnv(t *testing.T) {
	addr := startDemo(t)
	t.Setenv("EXPRCTL_ADDR", addr)
	got := runCmd("", "expr", "--call", fiveLowest)
	check(t, got, exitOK, fiveLowestWrite+"answer {}\n", "")
}

// startAgent serves exprd with the demo model (whose requests the returned
// server records) and no initial state; more options come last.
func startAgent(t *testing.T, more ...server.Option) (addr string, demo *scripted.Server) {
	t.Helper()
	demo, err := scripted.Demo()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(demo.Close)
	p, err := openaicompat.New("demo", openaicompat.ProviderConfig{BaseURL: demo.BaseURL(), Model: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	models := model.NewRegistry()
	if err := models.Register("demo", p); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(append([]server.Option{server.WithModels(models), server.WithLogger(slog.New(slog.DiscardHandler))}, more...)...)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, srv), demo
}

// exprctl agent prints a turn as it streams: the demo model calls the expr
// tool, whose write shows, then answers.
func TestAgentCommand(t *testing.T) {
	t.Parallel()
	addr, _ := startAgent(t, server.WithInitialState(demo.Products))
	got := runCmd("", "--addr", addr, "agent", "--expr", "--prompt", "Select the five cheapest products.")
	if got.code != 0 {
		t.Fatalf("exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{"step 0\n", "call expr ", "write path=scopes.root.selected value={", "result expr {}", "done: completed after 2 steps"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, got.stdout)
		}
	}
}

// --tool-choice's words and tool names reach the model request as the
// tool_choice OpenAI defines; what cannot be sent is a usage error.
func TestAgentToolChoice(t *testing.T) {
	t.Parallel()
	addr, demo := startAgent(t, server.WithInitialState(demo.Products))
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantChoice string // the first model request's tool_choice
		wantStderr string
	}{
		{name: "not given", args: []string{"--expr"}, wantChoice: `"auto"`},
		{name: "auto", args: []string{"--expr", "--tool-choice", "auto"}, wantChoice: `"auto"`},
		{name: "none", args: []string{"--expr", "--tool-choice", "none"}, wantChoice: `"none"`},
		{name: "required", args: []string{"--expr", "--tool-choice", "required"}, wantChoice: `"required"`},
		{name: "a tool", args: []string{"--expr", "--tool-choice", "expr"}, wantChoice: `{"type":"function","function":{"name":"expr"}}`},
		{name: "an undeclared tool", args: []string{"--expr", "--tool-choice", "add"}, wantCode: exitUsage,
			wantStderr: `--tool-choice "add": want auto, none, required or a declared tool's name (declared: expr)`},
		{name: "required without a tool", args: []string{"--tool-choice", "required"}, wantCode: exitUsage,
			wantStderr: "--tool-choice required: declare a tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the model's first request is this case's.
			before := len(demo.Requests())
			prompt := "Select the five cheapest products (" + tc.name + ")."
			got := runCmd("", append([]string{"--addr", addr, "agent", "--prompt", prompt}, tc.args...)...)
			check(t, result{got.code, "", got.stderr}, tc.wantCode, "", tc.wantStderr)
			reqs := demo.Requests()[before:]
			if tc.wantCode != exitOK {
				if len(reqs) != 0 {
					t.Errorf("got %d model requests, want none", len(reqs))
				}
				return
			}
			if len(reqs) == 0 {
				t.Fatalf("the model got no request (stdout %q)", got.stdout)
			}
			if choice := string(reqs[0].Chat.ToolChoice); choice != tc.wantChoice {
				t.Errorf("got tool_choice %s, want %s", choice, tc.wantChoice)
			}
		})
	}
}

// --state is the turn's state from its start: one the server refuses
// refuses the turn, with its status's code and message, and nothing runs.
func TestAgentStateRejected(t *testing.T) {
	t.Parallel()
	addr, _ := startAgent(t, server.WithMaxStateBytes(64))
	state := filepath.Join(t.TempDir(), "products.json")
	if err := os.WriteFile(state, demo.Products, 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCmd("", "--addr", addr, "agent", "--expr", "--state", state, "--prompt", "Select the five cheapest products.")
	check(t, got, exitError, "", "exprctl agent: ResourceExhausted: the state would be 3499 bytes of JSON, over the limit of 64\n")
}

// The demo model follows the request: asked to add two numbers with
// math.add declared, it calls it and answers with the sum.
func TestAgentCommandDemoCallsTheMatchingTool(t *testing.T) {
	addr := startTools(t, withModels(t, map[string]scripted.Script{"demo": scripted.DemoScript()}))
	var stdout, stderr strings.Builder
	code := run([]string{"--addr", addr, "agent", "--prompt", "What is 2 plus 3? use math", "--utcp", "add=math.add"}, strings.NewReader(""), &stdout, &stderr)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, stderr.String())
	}
	for _, want := range []string{`call add {"a":2,"b":3}`, `result add {"result":5}`, `The result of add is {"result":5}.`, "done: completed after 2 steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
