package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// mcpList posts one tools/list to a real exprd's MCP endpoint, as a
// 2025-06-18 client does after initialize, and returns its status and
// Retry-After.
func mcpList(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// A caller's MCP requests draw on the bucket of its gRPC RPCs
// (--rate-limit, --rate-burst): at the burst they are served, one past it
// is 429 with a Retry-After, and so is the caller's next RPC; another
// caller is served meanwhile. With auth off the bucket is the client's
// address.
func TestMCPRateLimitSharedWithGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const burst = 3
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice alice-token-000000001 *\nbob bob-token-0000000000002 *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rate := []string{"--rate-limit", "0.01", "--rate-burst", strconv.Itoa(burst), "--mcp-listen", "127.0.0.1:0"}
	p := startExprd(t, append(rate, "--auth-tokens-file", tokens)...)
	for i := range burst {
		if code, _ := mcpList(t, p.MCP, "alice-token-000000001"); code != http.StatusOK {
			t.Fatalf("alice's request %d of the burst: %d", i+1, code)
		}
	}
	code, retry := mcpList(t, p.MCP, "alice-token-000000001")
	if secs, err := strconv.Atoi(retry); code != http.StatusTooManyRequests || err != nil || secs < 1 {
		t.Errorf("one past the burst: %d, Retry-After %q; want 429 and a number of seconds", code, retry)
	}
	if code, _ := mcpList(t, p.MCP, "bob-token-0000000000002"); code != http.StatusOK {
		t.Errorf("another caller meanwhile: %d", code)
	}
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg := exprdv1.NewToolRegistryClient(conn)
	_, err = reg.ListTools(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer alice-token-000000001"), &exprdv1.ListToolsRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("alice's RPC after her MCP burst: %v, want RESOURCE_EXHAUSTED (one bucket)", err)
	}
	if _, err := reg.ListTools(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer bob-token-0000000000002"), &exprdv1.ListToolsRequest{}); err != nil {
		t.Errorf("bob's RPC: %v", err)
	}

	open := startExprd(t, rate...)
	for i := range burst {
		if code, _ := mcpList(t, open.MCP, ""); code != http.StatusOK {
			t.Fatalf("request %d of the burst, auth off: %d", i+1, code)
		}
	}
	if code, _ := mcpList(t, open.MCP, ""); code != http.StatusTooManyRequests {
		t.Errorf("one past the burst, auth off: %d, want 429", code)
	}
}
