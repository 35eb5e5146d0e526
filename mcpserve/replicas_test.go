package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/mcpserve"
)

// roundRobin is a reverse proxy on loopback that sends each request to
// the next backend in turn, whatever its connection or session, as a
// balancer without affinity does, and records what each answered.
type roundRobin struct {
	url      string // the MCP endpoint through the proxy
	backends []*url.URL
	next     atomic.Uint64

	mu       sync.Mutex
	answered []int          // requests each backend answered, by index
	statuses map[string]int // answers by method and status ("POST 200")
	sessions []string       // Mcp-Session-Id headers seen, either way
	wrong    []string       // answers that were not the protocol's
}

// startRoundRobin serves a round-robin proxy of the MCP endpoints at
// addrs (host:port) on a loopback port.
func startRoundRobin(t *testing.T, addrs ...string) *roundRobin {
	t.Helper()
	rr := &roundRobin{answered: make([]int, len(addrs)), statuses: map[string]int{}}
	for _, a := range addrs {
		rr.backends = append(rr.backends, &url.URL{Scheme: "http", Host: a})
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(rr.backends[(rr.next.Add(1)-1)%uint64(len(rr.backends))])
		},
		ModifyResponse: rr.record,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			rr.mu.Lock()
			rr.wrong = append(rr.wrong, fmt.Sprintf("%s %s to %s: %v", r.Method, r.URL.Path, r.URL.Host, err))
			rr.mu.Unlock()
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	rr.url = "http://" + lis.Addr().String() + mcpserve.Path
	return rr
}

// record counts an answer for the backend that gave it. A POST (a
// JSON-RPC message) must be answered 200 (a request) or 202 (a
// notification); a GET (a client's standalone stream) or a DELETE (the
// end of a session) 405, as exprd keeps no session.
func (rr *roundRobin) record(resp *http.Response) error {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	i := slices.IndexFunc(rr.backends, func(u *url.URL) bool { return u.Host == resp.Request.URL.Host })
	rr.answered[i]++
	rr.statuses[resp.Request.Method+" "+fmt.Sprint(resp.StatusCode)]++
	for _, h := range []http.Header{resp.Header, resp.Request.Header} {
		if id := h.Get("Mcp-Session-Id"); id != "" {
			rr.sessions = append(rr.sessions, id)
		}
	}
	ok := resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted
	if resp.Request.Method != http.MethodPost {
		ok = resp.StatusCode == http.StatusMethodNotAllowed
	}
	if !ok {
		rr.wrong = append(rr.wrong, fmt.Sprintf("%s to backend %d: %s", resp.Request.Method, i, resp.Status))
	}
	return nil
}

// counts is what the backends have answered so far, and what went wrong.
func (rr *roundRobin) counts() ([]int, []string, []string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return slices.Clone(rr.answered), slices.Clone(rr.sessions), slices.Clone(rr.wrong)
}

// startReplica runs a real exprd with the demo, its MCP endpoint on a
// loopback port of its own.
func startReplica(t *testing.T, bin, name string) *exprdproc.Proc {
	t.Helper()
	log := &exprdproc.LogBuffer{}
	p, err := exprdproc.Start(bin, log, "--demo", "--mcp-listen", "127.0.0.1:0", "--metrics-listen", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("replica %s's log:\n%s", name, log.String())
		}
	})
	if p.MCP == "" {
		t.Fatalf("replica %s serves no MCP endpoint:\n%s", name, log.String())
	}
	return p
}

// Two exprd processes, each with its own demo and nothing shared between
// them, behind a round-robin proxy: the go-sdk's client at 2026-07-28
// (server/discover) and at 2025-11-25 (initialize), and the TypeScript
// SDK's, connect through it, list, search, describe and run chains, a
// few times over, each request going to the other replica than the one
// before. Every request is answered, both replicas answer about half,
// and no session id is given or sent.
func TestReplicasBehindRoundRobin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := exprdproc.Build(ctx, "..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, bin, "A")
	b := startReplica(t, bin, "B")
	if a.Pid() == b.Pid() || a.MCP == b.MCP {
		t.Fatalf("replicas A (pid %d, %s) and B (pid %d, %s) are one", a.Pid(), a.MCP, b.Pid(), b.MCP)
	}
	rr := startRoundRobin(t, a.MCP, b.MCP)

	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(rev, func(t *testing.T) {
			for round := range 3 {
				before, _, _ := rr.counts()
				cs := connect(t, rr.url, rev, "")
				if got := cs.InitializeResult().ProtocolVersion; got != rev {
					t.Errorf("round %d: negotiated %s, want %s", round, got, rev)
				}
				if id := cs.ID(); id != "" {
					t.Errorf("round %d: session id %q, want none", round, id)
				}
				if names, _ := listAll(t, cs); !slices.Equal(names, []string{"search_tools", "tools_info", "call_tool_chain"}) {
					t.Errorf("round %d: tools/list: %v", round, names)
				}
				res := call(t, cs, "search_tools", map[string]any{"task_description": "multiply two numbers", "limit": 2})
				found := structuredAs[struct{ Tools []struct{ Name string } }](t, res)
				if res.IsError || len(found.Tools) == 0 || found.Tools[0].Name != "math.multiply" {
					t.Errorf("round %d: search_tools: %+v (%s)", round, found, text(res))
				}
				res = call(t, cs, "tools_info", map[string]any{"names": []string{"math.multiply"}})
				info := structuredAs[struct{ Tools []struct{ Name string } }](t, res)
				if res.IsError || len(info.Tools) != 1 || info.Tools[0].Name != "math.multiply" {
					t.Errorf("round %d: tools_info: %+v (%s)", round, info, text(res))
				}
				res = call(t, cs, "call_tool_chain", map[string]any{"code": chain})
				if run := structuredAs[chainResult](t, res); res.IsError || string(run.Value) != `{"result":36}` || len(run.Trace) != 2 {
					t.Errorf("round %d: call_tool_chain: %+v (%s)", round, run, text(res))
				}
				cs.Close()
				// One session's requests, on both replicas.
				after, _, _ := rr.counts()
				for i := range after {
					if after[i] == before[i] {
						t.Errorf("round %d: replica %c answered none of the session's requests (%v then %v)", round, 'A'+i, before, after)
					}
				}
			}
		})
	}

	t.Run("typescript", func(t *testing.T) {
		node := requireNode(t)
		cmd := exec.CommandContext(ctx, node, "client.mjs")
		cmd.Dir = nodeDir
		cmd.Env = append(os.Environ(), "EXPRD_MCP_URL="+rr.url, "EXPRD_MCP_TOKEN=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
		}
		var got struct {
			Tools  []string
			Search struct{ Tools []struct{ Name string } }
			Chain  struct {
				IsError    bool
				Structured chainResult
			}
			Bad          struct{ IsError bool }
			WithoutToken string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("the client's output %s: %v", out, err)
		}
		if !slices.Equal(got.Tools, []string{"search_tools", "tools_info", "call_tool_chain"}) {
			t.Errorf("tools: %v", got.Tools)
		}
		if len(got.Search.Tools) == 0 || got.Search.Tools[0].Name != "math.multiply" {
			t.Errorf("search_tools: %+v", got.Search)
		}
		if c := got.Chain; c.IsError || string(c.Structured.Value) != `{"result":36}` {
			t.Errorf("call_tool_chain: %+v", c)
		}
		if !got.Bad.IsError || got.WithoutToken != "served" {
			t.Errorf("a syntax error: %+v, want a tool error; a second client (no auth): %q, want served", got.Bad, got.WithoutToken)
		}
	})

	answered, sessions, wrong := rr.counts()
	rr.mu.Lock()
	t.Logf("answered: A %d, B %d; by method and status: %v", answered[0], answered[1], rr.statuses)
	rr.mu.Unlock()
	if len(wrong) > 0 {
		t.Errorf("answers that were not MCP's:\n%s", strings.Join(wrong, "\n"))
	}
	if len(sessions) > 0 {
		t.Errorf("session ids: %q, want none", sessions)
	}
	if d := answered[0] - answered[1]; answered[0] < 20 || d < -1 || d > 1 {
		t.Errorf("answered: A %d, B %d; want about half each of 40 or more", answered[0], answered[1])
	}
}
