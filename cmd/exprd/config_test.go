package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/vars"
)

// TestConfigParseErrorIsTheOnlyError is the regression test for a value
// that does not parse also being reported as a zero budget
// (EXPRD_MAX_ITERATIONS=abc gave "budget max_iterations: 0, want a positive
// value" as well): the parse error, naming the variable or the file's key,
// is the whole error.
func TestConfigParseErrorIsTheOnlyError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "exprd.yaml")
	if err := os.WriteFile(file, []byte("max-steps: many\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"an unsigned budget", nil, map[string]string{"EXPRD_MAX_ITERATIONS": "abc"}, `EXPRD_MAX_ITERATIONS="abc": parse error, want a whole number`},
		{"a negative unsigned budget", nil, map[string]string{"EXPRD_MAX_MEMORY_BUDGET": "-1"}, `EXPRD_MAX_MEMORY_BUDGET="-1": parse error, want a whole number`},
		{"a duration budget", nil, map[string]string{"EXPRD_MAX_TIMEOUT": "fast"}, `EXPRD_MAX_TIMEOUT="fast": parse error, want a duration such as 100ms or 10s`},
		{"an int budget out of range", nil, map[string]string{"EXPRD_MAX_STEPS": "99999999999999999999"}, `EXPRD_MAX_STEPS="99999999999999999999": value out of range, want an integer`},
		{"a duration that is not a budget", nil, map[string]string{"EXPRD_DRAIN_TIMEOUT": "soon"}, `EXPRD_DRAIN_TIMEOUT="soon": parse error, want a duration such as 100ms or 10s`},
		{"a number", nil, map[string]string{"EXPRD_RATE_LIMIT": "lots"}, `EXPRD_RATE_LIMIT="lots": parse error, want a number`},
		{"a bool", nil, map[string]string{"EXPRD_DEMO": "maybe"}, `EXPRD_DEMO="maybe": parse error, want true or false`},
		{"a budget in the file", []string{"--config", file}, nil, file + `: max-steps: "many": parse error, want an integer`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parseConfig(tt.args, io.Discard)
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v, want only %q", err, tt.want)
			}
		})
	}
}

// TestConfigFileOfComments: a config file with no document (empty, or
// only comments) sets nothing.
func TestConfigFileOfComments(t *testing.T) {
	for _, text := range []string{"", "# max-steps: 5\n"} {
		file := filepath.Join(t.TempDir(), "exprd.yaml")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig([]string{"--config", file}, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if want := evaluator.DefaultBudgets().MaxSteps; c.budgets.MaxSteps != want {
			t.Errorf("%q: got max-steps %d, want the default %d", text, c.budgets.MaxSteps, want)
		}
	}
}

// TestConfigBudgetErrorsNameTheFlag: a budget that parses but is not
// positive is named by its flag, in the flag's unit.
func TestConfigBudgetErrorsNameTheFlag(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"zero duration", []string{"--max-timeout", "0s"}, nil, "max-timeout: 0s, want a positive duration"},
		{"negative duration", []string{"--max-function-timeout", "-5ms"}, nil, "max-function-timeout: -5ms, want a positive duration"},
		{"zero unsigned", nil, map[string]string{"EXPRD_MAX_ITERATIONS": "0"}, "max-iterations: 0, want a positive value"},
		{"negative int", []string{"--max-steps", "-1"}, nil, "max-steps: -1, want a positive value"},
		{"two at once", []string{"--max-nodes", "0", "--max-value-bytes", "0"}, nil, "max-nodes: 0, want a positive value\nmax-value-bytes: 0, want a positive value"},
		{"no idle model connections", []string{"--model-idle-conns", "0"}, nil, "model-idle-conns: 0, want a positive value"},
		{"negative model connections", []string{"--model-max-conns", "-1"}, nil, "model-max-conns: -1, want 0 (no limit) or a positive value"},
		{"no caller share", []string{"--memory-caller-share", "0"}, nil, "memory-caller-share: 0, want more than 0 and at most 1"},
		{"a caller share past the whole", []string{"--memory-caller-share", "1.01"}, nil, "memory-caller-share: 1.01, want more than 0 and at most 1"},
		{"no Ps a core", []string{"--procs-per-core", "0"}, nil, "procs-per-core: 0, want 1 to 8"},
		{"Ps a core past 8", []string{"--procs-per-core", "9"}, nil, "procs-per-core: 9, want 1 to 8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parseConfig(tt.args, io.Discard)
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("the most Ps a core pass", func(t *testing.T) {
		if _, err := parseConfig([]string{"--procs-per-core", "8"}, io.Discard); err != nil {
			t.Errorf("got %v, want none", err)
		}
	})
	t.Run("the smallest positive values pass", func(t *testing.T) {
		args := []string{"--max-timeout", "1ns", "--max-function-timeout", "1ms", "--max-iterations", "1", "--max-memory-budget", "1",
			"--max-source-length", "1", "--max-nodes", "1", "--max-string-length", "1", "--max-array-length", "1",
			"--max-read-chars", "1", "--max-steps", "1", "--max-value-bytes", "1", "--max-alloc-bytes", "1", "--max-function-calls", "1",
			"--model-idle-conns", "1", "--model-max-conns", "0", "--memory-caller-share", "1", "--procs-per-core", "1"}
		if _, err := parseConfig(args, io.Discard); err != nil {
			t.Errorf("got %v, want none", err)
		}
	})
}

// TestUTCPFlagsDoWhatTheirHelpSays checks --utcp-timeout and
// --utcp-env-file against the registry exprd builds from them: a template's
// own timeout wins over --utcp-timeout even when longer, and a variable's
// key is the manual's name with each _ doubled, then _, then the variable.
func TestUTCPFlagsDoWhatTheirHelpSays(t *testing.T) {
	const utcpTimeout = 50 * time.Millisecond
	var provider *httptest.Server
	provider = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/utcp":
			tool := func(name string, tmpl map[string]any) map[string]any {
				tmpl["call_template_type"], tmpl["http_method"] = "http", "GET"
				return map[string]any{"name": name, "description": name, "tool_call_template": tmpl}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": []any{
				tool("patient", map[string]any{"url": provider.URL + "/slow", "timeout": 5000}),
				tool("plain", map[string]any{"url": provider.URL + "/slow"}),
				tool("secret", map[string]any{"url": provider.URL + "/auth", "headers": map[string]any{"Authorization": "Bearer ${TOKEN}"}}),
			}})
		case "/slow":
			select {
			case <-time.After(4 * utcpTimeout):
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, `{"ok": true}`)
		case "/auth":
			_ = json.NewEncoder(w).Encode(map[string]any{"authorization": r.Header.Get("Authorization")})
		}
	}))
	defer provider.Close()

	dir := t.TempDir()
	manuals := filepath.Join(dir, "manuals")
	if err := os.Mkdir(manuals, 0o700); err != nil {
		t.Fatal(err)
	}
	tmpl, _ := json.Marshal(map[string]any{"name": "slow_shop", "call_template_type": "http", "url": provider.URL + "/utcp"})
	if err := os.WriteFile(filepath.Join(manuals, "slow_shop.json"), tmpl, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name    string
		env     string // the --utcp-env-file
		tool    string
		want    string // the result's JSON
		wantErr error
	}{
		{"a template's timeout longer than --utcp-timeout wins", "slow__shop_TOKEN=abc\n", "patient", `{"ok":true}`, nil},
		{"a template without a timeout gets --utcp-timeout", "slow__shop_TOKEN=abc\n", "plain", "", utcp.ErrTimeout},
		{"the key doubles the manual's _", "slow__shop_TOKEN=abc\n", "secret", `{"authorization":"Bearer abc"}`, nil},
		{"<manual>_<VAR> with the _ not doubled is not found", "slow_shop_TOKEN=abc\n", "secret", "", vars.ErrNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			envFile := filepath.Join(dir, "utcp.env")
			if err := os.WriteFile(envFile, []byte(tt.env), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := parseConfig([]string{"--utcp-timeout", utcpTimeout.String(), "--manuals-dir", manuals, "--utcp-env-file", envFile, "--egress-allow", "loopback"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			// A variable not bound to its manual refuses the manual when
			// it is loaded, before any call.
			tools, err := startTools(context.Background(), c, nil, quiet)
			if err != nil {
				if tt.wantErr == nil || !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %v, want no error or %v", err, tt.wantErr)
				}
				return
			}
			defer tools.close()
			v, err := tools.reg.Call(context.Background(), "slow_shop."+tt.tool, nil)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("got %v, %v; want an error that is %v", v, err, tt.wantErr)
				}
				return
			}
			got, _ := json.Marshal(v)
			if err != nil || string(got) != tt.want {
				t.Errorf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}

	t.Run("the help's example key is the registry's", func(t *testing.T) {
		var c config
		help := newFlagSet(&c).Lookup("utcp-env-file").Usage
		if want := "demo_shop + API_TOKEN: " + vars.NamespacedKey("demo_shop", "API_TOKEN"); !strings.Contains(help, want) {
			t.Errorf("--utcp-env-file help: got %q, want it to contain %q", help, want)
		}
	})
}
