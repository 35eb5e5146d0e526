package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/cluster/etcdtest"
	"github.com/exprd/exprd/demo/providers"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// exprdBin is the exprd the tests run (EXPRD_BIN, or one built for them).
var exprdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "exprd-cluster")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exprdBin, err = exprdproc.Build(context.Background(), "..", dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// replica is one running exprd and its clients.
type replica struct {
	name string
	proc *exprdproc.Proc
	log  *exprdproc.LogBuffer
	reg  exprdv1.ToolRegistryClient
	code exprdv1.CodeModeClient
}

// startReplica starts an exprd on the shared registry in etcd: writes
// open without auth (the admin surface is tested elsewhere), loopback
// providers allowed, a short store timeout so that an unreachable etcd
// answers quickly.
func startReplica(t testing.TB, name, endpoint string, extra ...string) *replica {
	t.Helper()
	log := &exprdproc.LogBuffer{}
	args := append([]string{"--registry-store", "etcd://" + endpoint, "--registry-writes-without-auth",
		"--egress-allow", "loopback", "--registry-store-timeout", "1s", "--rate-limit", "100000", "--rate-burst", "100000"}, extra...)
	proc, err := exprdproc.Start(exprdBin, log, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop()
		if t.Failed() {
			t.Logf("replica %s's log:\n%s", name, log.String())
		}
	})
	conn, err := grpc.NewClient(proc.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &replica{name: name, proc: proc, log: log, reg: exprdv1.NewToolRegistryClient(conn), code: exprdv1.NewCodeModeClient(conn)}
}

// tools lists the replica's tools of one manual, every page.
func (r *replica) tools(ctx context.Context, manual string) ([]string, error) {
	var out []string
	req := &exprdv1.ListToolsRequest{Manual: manual}
	for {
		resp, err := r.reg.ListTools(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, t := range resp.GetTools() {
			out = append(out, t.GetName())
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			return out, nil
		}
	}
}

// waitTools polls until the replica lists exactly want for manual (nil:
// none), and returns how long that took.
func (r *replica) waitTools(t testing.TB, manual string, want []string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	var got []string
	for {
		var err error
		got, err = r.tools(context.Background(), manual)
		if err == nil && slices.Equal(got, want) {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s: manual %q has tools %v (err %v), want %v", r.name, manual, got, err, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// add calls tool (an add of the math provider's form) on the replica
// through CodeMode.
func (r *replica) add(ctx context.Context, tool string, a, b int) (float64, error) {
	resp, err := r.code.Execute(ctx, &exprdv1.ExecuteRequest{
		Code:  fmt.Sprintf(`codemode.CallTool(%q, {"a": %d, "b": %d}).result`, tool, a, b),
		Tools: []string{tool},
	})
	if err != nil {
		return 0, err
	}
	if e := resp.GetError(); e != nil {
		return 0, fmt.Errorf("%s: %s", e.GetReason(), e.GetMessage())
	}
	var v float64
	err = json.Unmarshal([]byte(resp.GetValueJson()), &v)
	return v, err
}

// metric reads one sample of the replica's /metrics: the first line
// starting with series.
func (r *replica) metric(t testing.TB, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.proc.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, series+" ") || strings.HasPrefix(line, series+"{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return -1
}

// readyz is the replica's /readyz registry detail.
func (r *replica) readyz(t testing.TB) (revision int64, staleness float64) {
	t.Helper()
	resp, err := http.Get("http://" + r.proc.Metrics + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Registry struct {
			Revision  int64   `json:"revision"`
			Staleness float64 `json:"staleness_seconds"`
		} `json:"registry"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Registry.Revision, body.Registry.Staleness
}

// mathManual is the math provider's manual with only the tools named,
// each renamed by rename (nil: as it is), as inline manual_json.
func mathManual(t testing.TB, m *providers.Math, rename map[string]string) []byte {
	t.Helper()
	resp, err := http.Get(m.URL() + "/utcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var man map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&man); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, tool := range man["tools"].([]any) {
		tm := tool.(map[string]any)
		if to, ok := rename[tm["name"].(string)]; ok {
			tm["name"] = to
			kept = append(kept, tm)
		}
	}
	man["tools"] = kept
	out, err := json.Marshal(man)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func register(ctx context.Context, r *replica, name string, manual []byte, replace bool) (*exprdv1.RegisterManualResponse, error) {
	return r.reg.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: name, Replace: replace,
		Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(manual)}})
}

// TestReplicasShareTheRegistry runs three replicas on one etcd and checks,
// in order: a manual registered on one is served by all; a replace and a
// deregister reach all; with etcd stopped reads and calls go on, writes
// are UNAVAILABLE with a RetryInfo and /readyz and the staleness gauge
// say how stale, and once it is back writes work and the replicas
// converge. What only the store decides (a race of registrations, a
// snapshot in pages, a compacted watch, a record no replica can read, an
// etcd restarted empty, a manual past a replica's bound, the record
// limit) is tested in toolstore, against the same etcd run as a process.
func TestReplicasShareTheRegistry(t *testing.T) {
	etcd := etcdtest.Start(t)
	math, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = math.Close() })
	a := startReplica(t, "A", etcd.Endpoint())
	b := startReplica(t, "B", etcd.Endpoint())
	c := startReplica(t, "C", etcd.Endpoint())
	all := []*replica{a, b, c}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("registered on A is callable on B and C", func(t *testing.T) {
		resp, err := register(ctx, a, "calc", mathManual(t, math, map[string]string{"add": "add", "multiply": "multiply"}), false)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"calc.add", "calc.multiply"}
		if !slices.Equal(resp.GetTools(), want) {
			t.Fatalf("registered %v, want %v", resp.GetTools(), want)
		}
		// A answered once it serves the manual: no wait on A.
		if got, err := a.add(ctx, "calc.add", 2, 3); err != nil || got != 5 {
			t.Fatalf("A: calc.add(2, 3) = %v, %v; want 5", got, err)
		}
		for _, r := range []*replica{b, c} {
			t.Logf("registered on A, listed on %s after %v", r.name, r.waitTools(t, "calc", want))
			if got, err := r.add(ctx, "calc.add", 4, 5); err != nil || got != 9 {
				t.Fatalf("%s: calc.add(4, 5) = %v, %v; want 9", r.name, got, err)
			}
		}
	})

	t.Run("a replace on B reaches every replica", func(t *testing.T) {
		if _, err := register(ctx, b, "calc", mathManual(t, math, map[string]string{"add": "sum"}), true); err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			r.waitTools(t, "calc", []string{"calc.sum"})
			if got, err := r.add(ctx, "calc.sum", 1, 1); err != nil || got != 2 {
				t.Fatalf("%s: calc.sum(1, 1) = %v, %v; want 2", r.name, got, err)
			}
			if _, err := r.add(ctx, "calc.add", 1, 1); err == nil {
				t.Fatalf("%s: calc.add still answers after the replace", r.name)
			}
		}
	})

	t.Run("a deregister on C reaches every replica", func(t *testing.T) {
		resp, err := c.reg.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "calc"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := resp.GetTools(), []string{"calc.sum"}; !slices.Equal(got, want) {
			t.Fatalf("deregistered %v, want %v", got, want)
		}
		for _, r := range all {
			r.waitTools(t, "calc", nil)
		}
		_, err = a.reg.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "calc"})
		if got := status.Code(err); got != codes.NotFound {
			t.Fatalf("a second deregister: got %v, want NotFound", err)
		}
	})

	t.Run("etcd stopped: reads and calls go on, writes UNAVAILABLE; back: converge", func(t *testing.T) {
		if _, err := register(ctx, a, "steady", mathManual(t, math, map[string]string{"add": "add"}), false); err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			r.waitTools(t, "steady", []string{"steady.add"})
		}
		etcd.Stop()
		for _, r := range all {
			if got, err := r.add(ctx, "steady.add", 20, 22); err != nil || got != 42 {
				t.Fatalf("%s with etcd down: steady.add = %v, %v; want 42", r.name, got, err)
			}
			r.waitTools(t, "steady", []string{"steady.add"})
		}
		for _, r := range all {
			_, err := register(ctx, r, "while_down", mathManual(t, math, map[string]string{"add": "add"}), false)
			if got := status.Code(err); got != codes.Unavailable {
				t.Fatalf("%s: register with etcd down: got %v, want Unavailable", r.name, err)
			}
			if !slices.ContainsFunc(status.Convert(err).Details(), func(d any) bool { _, ok := d.(*errdetails.RetryInfo); return ok }) {
				t.Errorf("%s: register with etcd down: details %v, want a RetryInfo", r.name, status.Convert(err).Details())
			}
			_, err = r.reg.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "steady"})
			if got := status.Code(err); got != codes.Unavailable {
				t.Fatalf("%s: deregister with etcd down: got %v, want Unavailable", r.name, err)
			}
		}
		time.Sleep(3 * time.Second) // past two progress intervals
		for _, r := range all {
			if _, stale := r.readyz(t); stale < 2 {
				t.Errorf("%s: /readyz says %.1f s stale with etcd down 3 s, want ≥ 2", r.name, stale)
			}
			if got := r.metric(t, "exprd_registry_staleness_seconds"); got < 2 {
				t.Errorf("%s: exprd_registry_staleness_seconds = %v with etcd down 3 s, want ≥ 2", r.name, got)
			}
		}

		if err := etcd.Start(); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		deadline := back.Add(30 * time.Second)
		for {
			_, err := register(ctx, b, "after", mathManual(t, math, map[string]string{"add": "add"}), false)
			if err == nil {
				break
			}
			if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
				t.Fatalf("register once etcd is back: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("etcd back: the first write succeeded after %v", time.Since(back))
		for _, r := range all {
			r.waitTools(t, "after", []string{"after.add"})
			r.waitTools(t, "while_down", nil)
		}
		time.Sleep(3 * time.Second) // a progress notice has come since
		for _, r := range all {
			if _, stale := r.readyz(t); stale > 4.5 {
				t.Errorf("%s: /readyz says %.1f s stale with etcd back, want ≤ 4.5 (two progress intervals)", r.name, stale)
			}
		}
	})
}
