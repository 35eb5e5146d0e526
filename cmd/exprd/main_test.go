package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// startExprd builds and starts a real exprd process and returns its address.
func startExprd(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "exprd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec.Msg == "exprd serving" {
			go func() { // keep draining the log
				for lines.Scan() {
				}
			}()
			return cmd, rec.Addr
		}
	}
	t.Fatal("exprd never said it was serving")
	return nil, ""
}

func TestDemoAndDrainOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	cmd, addr := startExprd(t, "--demo", "--drain-timeout", "500ms")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	health := healthpb.NewHealthClient(conn)
	if r, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: got %v %v, want SERVING", r, err)
	}

	// A session on the demo state, with a call waiting for a confirm.
	stream, err := exprdv1.NewExprToolClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *exprdv1.SessionRequest) {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{Settings: &exprdv1.Settings{
		Read:      true,
		Functions: []*exprdv1.Function{{Name: "convertPrice", Runner: exprdv1.Function_RUNNER_SERVER}},
	}}}})
	if m, err := stream.Recv(); err != nil || m.GetOpened() == nil {
		t.Fatalf("got %v %v, want Opened", m, err)
	}
	send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "a", InputJson: []byte(
		`{"read": "convertPrice({amount: sortBy(scopes.root.products.items, .price)[0].price, to: \"USD\"})"}`)}}})
	if m, err := stream.Recv(); err != nil || string(m.GetAnswer().GetAnswerJson()) != `{"value":9.55}` {
		t.Fatalf("got %v %v, want the cheapest price in USD", m, err)
	}
	send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "b", InputJson: []byte(
		`{"steps": [{"confirm": "go?", "set": "scopes.root.x", "expr": "1"}]}`)}}})
	if m, err := stream.Recv(); err != nil || m.GetConfirmRequest() == nil {
		t.Fatalf("got %v %v, want ConfirmRequest", m, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The open stream is ended once the drain window is over.
	for {
		_, err := stream.Recv()
		if err != nil {
			if c := status.Code(err); c != codes.Unavailable && c != codes.Canceled {
				t.Errorf("the open stream ended with %v, want Unavailable", err)
			}
			break
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exprd exited with %v, want 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exprd did not exit after its drain window")
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("EXPRD_MAX_ITERATIONS", "500")
	t.Setenv("EXPRD_LISTEN", ":6000")
	c, err := parseFlags([]string{"--listen", ":7000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.budgets.MaxIterations != 500 || c.listen != ":7000" {
		t.Errorf("got iterations %d listen %q, want 500 from the environment and :7000 from the flag", c.budgets.MaxIterations, c.listen)
	}
	t.Setenv("EXPRD_MAX_ITERATIONS", "lots")
	if _, err := parseFlags(nil); err == nil {
		t.Error("want an error naming EXPRD_MAX_ITERATIONS")
	}
	os.Unsetenv("EXPRD_MAX_ITERATIONS")
}
