// Package mcpeverything runs the reference MCP test server,
// @modelcontextprotocol/server-everything, for tests: pinned by the
// package.json and package-lock.json in utcp/mcptransport/testdata/everything,
// installed there with `npm ci` when node_modules is missing or was
// installed from another lock file (a stamp file remembers which), and run
// with node over streamable HTTP on loopback or over stdio. Without node
// and npm a test is skipped, and fails under CI (CI set).
package mcpeverything

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the server's version the lock file pins.
const Version = "2026.8.31"

// Bounds on the slow parts.
const (
	npmCITimeout = 3 * time.Minute
	startTimeout = 30 * time.Second
)

// stampFile, inside node_modules, holds the hash of the package-lock.json
// the last successful npm ci installed (npm ci removes node_modules first,
// so a failed install leaves none).
const stampFile = "node_modules/.exprd-package-lock.sha256"

var installOnce sync.Mutex

// Dir is where the server is installed.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "utcp", "mcptransport", "testdata", "everything")
}

// Require skips (fails under CI) a test that cannot run the server, and
// installs it. It returns node's path.
func Require(t testing.TB) string {
	t.Helper()
	var node string
	for _, tool := range []string{"node", "npm"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			msg := fmt.Sprintf("%s is not on PATH: the reference MCP server cannot run (install Node 20+ with npm)", tool)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		if tool == "node" {
			node = p
		}
	}
	install(t)
	return node
}

func install(t testing.TB) {
	t.Helper()
	installOnce.Lock()
	defer installOnce.Unlock()
	dir := Dir()
	// The test binaries of several packages install into one directory,
	// perhaps at once: one at a time.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "exprd-mcpeverything-npm.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	if got, err := os.ReadFile(filepath.Join(dir, stampFile)); err == nil && strings.TrimSpace(string(got)) == want {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmCITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("npm ci took longer than %s (is the npm registry reachable?)\n%s", npmCITimeout, out)
		}
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, stampFile), []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lockFile holds an exclusive lock on path until the returned func.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// entry is the server's script.
func entry() string {
	return filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// StartHTTP runs the server in streamable-HTTP mode on a free loopback
// port (stopped when the test ends) and returns its endpoint,
// http://127.0.0.1:PORT/mcp.
func StartHTTP(t testing.TB) string {
	t.Helper()
	return start(t, "streamableHttp") + "/mcp"
}

// StartSSE runs the server in the 2024-11-05 HTTP+SSE mode and returns
// its endpoint, http://127.0.0.1:PORT/sse.
func StartSSE(t testing.TB) string {
	t.Helper()
	return start(t, "sse") + "/sse"
}

func start(t testing.TB, mode string) string {
	t.Helper()
	node := Require(t)
	cmd := exec.Command(node, "--import", filepath.Join(Dir(), "loopback.mjs"), entry(), mode)
	cmd.Dir = Dir()
	cmd.Env = []string{"PORT=0"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "EXPRD_LISTENING "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p
	case <-time.After(startTimeout):
		t.Fatalf("the reference MCP server did not listen within %s", startTimeout)
		return ""
	}
}

// StdioManual is an mcp manual call template running the server over
// stdio, with one server named server.
func StdioManual(t testing.TB, server string) json.RawMessage {
	t.Helper()
	node := Require(t)
	raw, _ := json.Marshal(map[string]any{"call_template_type": "mcp", "config": map[string]any{"mcpServers": map[string]any{
		server: map[string]any{"transport": "stdio", "command": node, "args": []string{entry(), "stdio"}, "cwd": Dir()}}}})
	return raw
}

// HTTPManual is an mcp manual call template naming the server at url
// over streamable HTTP.
func HTTPManual(server, url string) json.RawMessage { return urlManual(server, "http", url) }

// SSEManual is the same over the HTTP+SSE transport.
func SSEManual(server, url string) json.RawMessage { return urlManual(server, "sse", url) }

func urlManual(server, transport, url string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"call_template_type": "mcp", "config": map[string]any{"mcpServers": map[string]any{
		server: map[string]any{"transport": transport, "url": url}}}})
	return raw
}
