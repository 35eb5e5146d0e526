package python_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// python is Debian's interpreter, the one python3-grpcio and
// python3-protobuf install for; a python3 earlier on PATH (pyenv, a
// virtualenv) would not see them.
const python = "/usr/bin/python3"

// Bounds on the slow parts: apt-get may fetch the package lists and the
// packages; the client itself takes well under a second against a warm
// server.
const (
	installTimeout  = 5 * time.Minute
	generateTimeout = time.Minute
	buildTimeout    = 3 * time.Minute
	clientTimeout   = 90 * time.Second
)

// TestPythonClient generates the stubs from proto/, then runs client.py
// against a real exprd --demo: the client asserts every message it gets
// and exits non-zero on a mismatch.
func TestPythonClient(t *testing.T) {
	ensureDeps(t)

	stubs := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), generateTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, python, "generate.py", stubs).CombinedOutput(); err != nil {
		t.Fatalf("%s generate.py %s: %v\n%s", python, stubs, err, out)
	}

	moduleDir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	bin, err := exprdproc.Build(ctx, moduleDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var serverLog exprdproc.LogBuffer
	p, err := exprdproc.Start(bin, &serverLog, "--demo", "--metrics-listen", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)

	ctx, cancel = context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "client.py", "--stubs", stubs, p.Addr)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s client.py %s: %v\n--- python output ---\n%s--- exprd log ---\n%s", python, p.Addr, err, out, serverLog.String())
	}

	cheapest := strings.Join(fiveCheapest(t), ", ")
	for _, want := range []string{
		"← opened session=",
		"✓ the five cheapest: " + cheapest + "; the patch applied",
		"← rejected kind=state_patch code=3 (INVALID_ARGUMENT)",
		"reason=unknown-reference",
		"✓ still usable",
		"← confirm call=notify-yes step=0",
		`← answer call=notify-no {"declined":true}`,
		"← function_call call=download id=download/1 name=downloadCsv rows=5",
		"✓ the answer carries the CSV built here",
		"← describe name=expr",
		"← call expr id=",
		"← run_on_client expr id=",
		"-unknown code=5 (NOT_FOUND)",
		"→ tool_output id=",
		"← result expr id=",
		"← done: STOP_REASON_COMPLETED after 2 steps",
		"✓ the turn ran expr on the client once, selected " + cheapest,
		"→ start provider=demo tools=expr(EXECUTOR_CLIENT) detach=true",
		" run_on_client\n✗ stream dropped after seq ",
		"→ resume turn=",
		" run_on_client pending\n→ tool_output id=",
		"✓ resumed after seq ",
		": the call answered once, every event once, seq 1..",
		"PASS: ExprTool session and AgentLoop turn as expected, the turn resumed once",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("python output lacks %q\n--- python output ---\n%s", want, out)
		}
	}
	if testing.Verbose() {
		t.Logf("python output:\n%s", out)
	}
}

// ensureDeps runs install-deps.sh when what the example needs is missing
// (install-deps.sh --check). When it still cannot be had, the test fails
// in CI and skips elsewhere.
func ensureDeps(t *testing.T) {
	t.Helper()
	if haveDeps() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "install-deps.sh")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("took longer than %s (are the Debian mirrors reachable?)", installTimeout)
	}
	if err == nil {
		err = haveDeps()
	}
	if err == nil {
		return
	}
	msg := fmt.Sprintf("install-deps.sh could not install python3-grpcio, python3-protobuf, protobuf-compiler, "+
		"protobuf-compiler-grpc and libprotobuf-dev for %s (it needs apt-get and root or sudo): %v\n%s", python, err, bytes.TrimSpace(out))
	exprdproc.SkipOrFailInCI(t, "%s", msg)
}

// haveDeps says whether client.py and generate.py have what they need.
func haveDeps() error {
	out, err := exec.Command("bash", "install-deps.sh", "--check").CombinedOutput()
	if err != nil {
		return fmt.Errorf("install-deps.sh --check: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// fiveCheapest is the ids of the five lowest-priced demo products, sorted:
// computed from the data, so the test does not take the client's word for it.
func fiveCheapest(t *testing.T) []string {
	t.Helper()
	ids, err := demo.CheapestProducts(5)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
