package mcpserve_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/mcpserve"
)

// nodeDir holds the TypeScript SDK's client script, its package.json and
// package-lock.json (@modelcontextprotocol/sdk 1.32.2, pinned).
const nodeDir = "testdata/node"

// nodeStamp, inside node_modules, holds the hash of the lock file the
// last npm ci installed.
const nodeStamp = "node_modules/.exprd-package-lock.sha256"

// requireNode returns node's path once the client's packages are
// installed (npm ci); without node and npm the test is skipped, and
// fails under CI.
func requireNode(t *testing.T) string {
	t.Helper()
	return requireNodeIn(t, nodeDir)
}

// requireNodeIn is requireNode for the npm project in dir.
func requireNodeIn(t *testing.T, dir string) string {
	t.Helper()
	var node string
	for _, tool := range []string{"node", "npm"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			msg := tool + " is not on PATH: the TypeScript SDK's client cannot run (install Node 20+ with npm)"
			exprdproc.SkipOrFailInCI(t, "%s", msg)
		}
		if tool == "node" {
			node = p
		}
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	// Test binaries may run at once: one npm ci at a time.
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "exprd-mcpserve-npm.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	if got, err := os.ReadFile(filepath.Join(dir, nodeStamp)); err == nil && strings.TrimSpace(string(got)) == want {
		return node
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, nodeStamp), []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return node
}

// The official TypeScript SDK's client, against a real endpoint with
// auth on: it lists the tools, searches, reads a schema, runs a chain of
// two calls to the math provider on loopback, reads a tool error, and is
// refused without its token.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Verify: verifier, Expose: mcpserve.ExposeBoth, Limits: mcpserve.Limits{PageSize: 4}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "EXPRD_MCP_URL="+url, "EXPRD_MCP_TOKEN="+tokenMCP)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Server struct{ Name string }
		Tools  []string
		Search struct {
			Tools []struct{ Name, Inputs string }
		}
		Info struct {
			Tools []struct {
				Name        string
				InputSchema map[string]any `json:"input_schema"`
			}
		}
		Chain struct {
			IsError    bool
			Structured chainResult
		}
		Bad struct {
			IsError bool
			Text    string
		}
		WithoutToken string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's output %s: %v", out, err)
	}
	if got.Server.Name != "exprd" {
		t.Errorf("server %+v, want exprd", got.Server)
	}
	for _, want := range []string{"search_tools", "tools_info", "call_tool_chain", "math.add", "math.multiply", "catalog.get"} {
		if !slices.Contains(got.Tools, want) {
			t.Errorf("tools %v: %s missing (pages of 4)", got.Tools, want)
		}
	}
	if len(got.Search.Tools) == 0 || got.Search.Tools[0].Name != "math.multiply" || got.Search.Tools[0].Inputs != "{a: number, b: number}" {
		t.Errorf("search_tools: %+v", got.Search)
	}
	if len(got.Info.Tools) != 1 || got.Info.Tools[0].InputSchema["type"] != "object" {
		t.Errorf("tools_info: %+v", got.Info)
	}
	if c := got.Chain; c.IsError || string(c.Structured.Value) != `{"result":36}` || len(c.Structured.Trace) != 2 {
		t.Errorf("call_tool_chain: %+v", c)
	}
	if !got.Bad.IsError || !strings.Contains(got.Bad.Text, "expression-syntax") {
		t.Errorf("a syntax error: %+v, want a tool error naming its reason", got.Bad)
	}
	if !strings.Contains(got.WithoutToken, "401") && !strings.Contains(strings.ToLower(got.WithoutToken), "unauthorized") {
		t.Errorf("without a token: %q, want 401", got.WithoutToken)
	}
}

// nodeV2Dir holds the TypeScript client 2.x's script and its pinned
// packages (@modelcontextprotocol/client 2.3.1), which speaks 2026-07-28.
const nodeV2Dir = "testdata/nodev2"

// The official TypeScript client 2.x asks its user through its own
// input_required driver: a chain that needs approval runs when the user
// accepts and not when they decline, each asked once with the program.
func TestTypeScriptClientApproval(t *testing.T) {
	t.Parallel()
	node := requireNodeIn(t, nodeV2Dir)
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Verify: verifier, NeedsApproval: []string{"math.divide"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = nodeV2Dir
	cmd.Env = append(os.Environ(), "EXPRD_MCP_URL="+url, "EXPRD_MCP_TOKEN="+tokenMCP, "EXPRD_MCP_CODE="+divideChain)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	type run struct {
		Asked      []string
		IsError    bool
		Text       string
		Structured chainResult
	}
	var got struct{ Accepted, Declined run }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's output %s: %v", out, err)
	}
	for name, r := range map[string]run{"accepted": got.Accepted, "declined": got.Declined} {
		if len(r.Asked) != 1 || !strings.Contains(r.Asked[0], divideChain) {
			t.Errorf("%s: asked %q, want once, with the program", name, r.Asked)
		}
	}
	if a := got.Accepted; a.IsError || string(a.Structured.Value) != `{"result":2}` || len(a.Structured.Trace) != 2 {
		t.Errorf("accepted: %+v", a)
	}
	if d := got.Declined; !d.IsError || !strings.Contains(d.Text, "did not approve") || len(d.Structured.Trace) != 0 {
		t.Errorf("declined: %+v", d)
	}
}
