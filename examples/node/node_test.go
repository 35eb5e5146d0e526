package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// Bounds on the slow parts: npm ci fetches from the registry when
// node_modules is missing or stale; the client itself takes well under a
// second against a warm server.
const (
	npmCITimeout  = 3 * time.Minute
	buildTimeout  = 3 * time.Minute
	clientTimeout = 90 * time.Second
)

// stampFile, inside node_modules, holds the hash of the package-lock.json
// the last successful npm ci installed. npm ci removes node_modules first,
// so a failed install leaves no stamp and the next run installs again.
const stampFile = "node_modules/.exprd-package-lock.sha256"

// TestNodeClient runs client.mjs against a real exprd --demo: the client
// asserts every message it gets and exits non-zero on a mismatch.
func TestNodeClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			exprdproc.SkipOrFailInCI(t, "%s is not on PATH: the Node client cannot run (install Node 20+ with npm to run this test)", tool)
		}
	}
	checkPinned(t)
	installDeps(t)
	checkNoGoFiles(t)

	moduleDir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
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
	cmd := exec.CommandContext(ctx, "node", "client.mjs", p.Addr)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node client.mjs %s: %v\n--- node output ---\n%s--- exprd log ---\n%s", p.Addr, err, out, serverLog.String())
	}

	cheapest := fiveCheapest(t)
	for _, want := range []string{
		"← opened session=",
		"✓ the five cheapest: " + strings.Join(cheapest, ", ") + "; the patch applied",
		"← rejected kind=state_patch code=3 (INVALID_ARGUMENT)",
		`reason=unknown-reference`,
		"✓ still usable",
		"← confirm call=notify-yes step=0",
		`← answer call=notify-no {"declined":true}`,
		"← function_call call=download id=download/1 name=downloadCsv rows=5",
		"✓ the answer carries the CSV built here",
		"← hook HOOK_PREPARE_STEP id=1 step=0",
		"← rejected kind=tool_output call=nobody code=5 (NOT_FOUND)",
		"→ hook_reply id=1 tool_choice=MODE_REQUIRED",
		"← call expr id=",
		" step=0 expr_step=0 path=scopes.root.selected value=",
		"← result expr id=",
		"← done: STOP_REASON_COMPLETED after 2 steps",
		"✓ the turn ran expr once, selected " + strings.Join(cheapest, ", "),
		"→ start provider=demo tools=expr(EXECUTOR_EXPR) detach=true",
		"✗ stream dropped after seq 3",
		"→ resume turn=",
		" after_seq=3",
		"✓ resumed after seq 3: every event once, seq 1..",
		"PASS: ExprTool session and AgentLoop turn as expected, the turn resumed once",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("node output lacks %q\n--- node output ---\n%s", want, out)
		}
	}
	if testing.Verbose() {
		t.Logf("node output:\n%s", out)
	}
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

// exactVersion is a semver version with no range operator.
var exactVersion = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// checkPinned fails when package.json names a dependency by a range: the
// lockfile and the README promise exact versions.
func checkPinned(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies, DevDependencies map[string]string
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	for name, v := range pkg.Dependencies {
		if !exactVersion.MatchString(v) {
			t.Errorf("package.json: %s is %q, want an exact version (npm install --save-exact)", name, v)
		}
	}
	if len(pkg.DevDependencies) > 0 {
		t.Errorf("package.json has devDependencies %v; the example needs none", pkg.DevDependencies)
	}
}

// installDeps runs npm ci when node_modules is missing or was installed
// from another package-lock.json.
func installDeps(t *testing.T) {
	t.Helper()
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	if got, err := os.ReadFile(stampFile); err == nil && strings.TrimSpace(string(got)) == want {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmCITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("npm ci took longer than %s (is the npm registry reachable?)\n%s", npmCITimeout, out)
		}
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	if err := os.WriteFile(stampFile, []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkNoGoFiles fails when an npm package ships .go files: go does not
// skip directories named node_modules, so `go vet ./...` and
// `go test ./...` would take them for packages of this module.
func checkNoGoFiles(t *testing.T) {
	t.Helper()
	var found []string
	err := filepath.WalkDir("node_modules", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("node_modules holds .go files that ./... would build as packages of this module: %v", found)
	}
}
