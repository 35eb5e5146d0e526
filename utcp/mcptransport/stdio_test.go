package mcptransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/mcptransport"
)

// stdioManual is a manual template running the test binary as a stdio
// server, with env.
func stdioManual(t *testing.T, env map[string]string) json.RawMessage {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env[stdioServerEnv] = "1"
	raw, _ := json.Marshal(map[string]any{"call_template_type": "mcp", "config": map[string]any{"mcpServers": map[string]any{
		"local": map[string]any{"transport": "stdio", "command": exe, "env": env}}}})
	return raw
}

// manualsDir writes manuals to a directory, as an operator's --manuals-dir.
func manualsDir(t *testing.T, manuals map[string]json.RawMessage) string {
	t.Helper()
	dir := t.TempDir()
	for name, raw := range manuals {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func callJSON(t *testing.T, reg *utcp.Registry, tool string) any {
	t.Helper()
	v, err := reg.Call(context.Background(), tool, nil)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return v
}

func TestStdioFromTheOperator(t *testing.T) {
	t.Parallel()
	reg, logs := newRegistry(t)
	dir := manualsDir(t, map[string]json.RawMessage{"local": stdioManual(t, map[string]string{"GREETING": "hi"})})
	if _, err := reg.LoadDir(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	// Its environment is what the manual names, nothing of exprd's.
	env := callJSON(t, reg, "local.local.env").([]any)
	var got []string
	for _, e := range env {
		got = append(got, e.(string))
	}
	slices.Sort(got)
	if want := []string{"GREETING=hi", stdioServerEnv + "=1"}; !slices.Equal(got, want) {
		t.Errorf("environment: got %v, want %v", got, want)
	}
	eventually(t, "the server's stderr in the log", func() bool {
		return slices.ContainsFunc(logs.all(), func(l string) bool { return strings.Contains(l, "stdio test server starting") })
	})
	pid := int(callJSON(t, reg, "local.local.pid").(float64))
	if again := int(callJSON(t, reg, "local.local.pid").(float64)); again != pid {
		t.Errorf("a second call ran in pid %d, the first in %d: the session is not reused", again, pid)
	}

	// A process that exits is started again, after the back-off.
	if _, err := reg.Call(context.Background(), "local.local.exit", nil); reason(err) != utcp.ReasonBroken {
		t.Errorf("exit: got %v, want broken", err)
	}
	if _, err := reg.Call(context.Background(), "local.local.pid", nil); err == nil {
		t.Errorf("a call within the back-off reached a new process")
	}
	time.Sleep(mcptransport.MinBackoff + 50*time.Millisecond)
	newPid := int(callJSON(t, reg, "local.local.pid").(float64))
	if newPid == pid {
		t.Errorf("the process that exited still answers")
	}
	// Close stops it.
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(newPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Close, the process %d: %v, want gone", newPid, err)
	}
}

func TestStdioRefusedOverTheAPI(t *testing.T) {
	t.Parallel()
	reg, _ := newRegistry(t)
	// Registered without utcp.WithOperator, as the API registers.
	_, err := reg.Register(context.Background(), "local", utcp.FromTemplate(stdioManual(t, map[string]string{})))
	if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), "only the operator may configure one") {
		t.Fatalf("got %v, want the stdio server refused", err)
	}
	// A manual of tools whose templates are stdio (as a store would share).
	tools := `{"utcp_version": "1.0.1", "tools": [{"name": "x", "tool_call_template": ` + string(stdioManual(t, map[string]string{})) + `}]}`
	_, err = reg.Register(context.Background(), "shared", utcp.FromText(tools).AllowProtocols("mcp"))
	if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), "tools[0].tool_call_template.config.mcpServers.local.transport") {
		t.Fatalf("got %v, want the stdio tool refused", err)
	}
}

func TestStdioLimit(t *testing.T) {
	t.Parallel()
	manuals := map[string]json.RawMessage{}
	for i := range mcptransport.MaxStdioServers + 1 {
		manuals[fmt.Sprintf("m%02d", i)] = stdioManual(t, map[string]string{})
	}
	// At the limit.
	reg, _ := newRegistry(t)
	dir := manualsDir(t, map[string]json.RawMessage{})
	for name, raw := range manuals {
		if name != fmt.Sprintf("m%02d", mcptransport.MaxStdioServers) {
			_ = os.WriteFile(filepath.Join(dir, name+".json"), raw, 0o644)
		}
	}
	if _, err := reg.LoadDir(context.Background(), dir); err != nil {
		t.Fatalf("%d stdio servers: %v", mcptransport.MaxStdioServers, err)
	}
	// One past it.
	last := fmt.Sprintf("m%02d", mcptransport.MaxStdioServers)
	_, err := reg.Register(utcp.WithOperator(context.Background()), last, utcp.FromTemplate(manuals[last]))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d stdio MCP servers", mcptransport.MaxStdioServers)) {
		t.Fatalf("one past the limit: got %v", err)
	}
}

func TestStdioNotUTF8(t *testing.T) {
	t.Parallel()
	reg, _ := newRegistry(t)
	if _, err := reg.LoadDir(context.Background(), manualsDir(t, map[string]json.RawMessage{"local": stdioManual(t, map[string]string{})})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := reg.Call(ctx, "local.local.bad", nil); reason(err) != utcp.ReasonMalformed {
		t.Errorf("got %v, want malformed-response", err)
	}
}
