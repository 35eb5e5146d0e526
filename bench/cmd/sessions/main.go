// Command sessions measures what a Session costs a real exprd process in
// resident memory: it starts exprd, opens idle sessions (Open, nothing
// else), then active ones (Open, a products state pushed, one call that
// writes), and reports the RSS each kind adds per session, as JSON.
//
//	go run ./cmd/sessions --module .. --sessions 2000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/exprd/exprd/demo"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// Report is what the command prints.
type Report struct {
	Sessions            int     `json:"sessions"`
	StateBytes          int     `json:"state_bytes"`
	BaseRSSMiB          float64 `json:"base_rss_mib"`
	IdleKiBPerSession   float64 `json:"idle_kib_per_session"`
	ActiveKiBPerSession float64 `json:"active_kib_per_session"`
}

// The call each active session makes once: select the five lowest priced.
const call = `{"steps": [{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}]}`

func main() {
	module := flag.String("module", ".", "the exprd module's root, to build ./cmd/exprd")
	n := flag.Int("sessions", 2000, "sessions of each kind")
	flag.Parse()
	r, err := run(*module, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sessions:", err)
		os.Exit(1)
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Println(string(out))
}

func run(module string, n int) (*Report, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "exprd-sessions")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin, err := exprdproc.Build(ctx, module, dir)
	if err != nil {
		return nil, err
	}
	srv, err := exprdproc.Start(bin, nil, "--max-sessions", "100000", "--rate-limit", "100000", "--rate-burst", "100000")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	conns := make([]*grpc.ClientConn, max(2*n/200, 1))
	for i := range conns {
		if conns[i], err = grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
		defer conns[i].Close()
	}
	r := &Report{Sessions: n, StateBytes: len(demo.Products)}
	base, err := settled(srv)
	if err != nil {
		return nil, err
	}
	r.BaseRSSMiB = base
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		if _, err := open(ctx, conns[i%len(conns)], false); err != nil {
			return nil, fmt.Errorf("idle session %d: %w", i, err)
		}
	}
	idle, err := settled(srv)
	if err != nil {
		return nil, err
	}
	r.IdleKiBPerSession = (idle - base) * 1024 / float64(n)
	for i := range n {
		if _, err := open(ctx, conns[i%len(conns)], true); err != nil {
			return nil, fmt.Errorf("active session %d: %w", i, err)
		}
	}
	active, err := settled(srv)
	if err != nil {
		return nil, err
	}
	r.ActiveKiBPerSession = (active - idle) * 1024 / float64(n)
	return r, nil
}

// settled reads the server's RSS once the sessions' set-up is done.
func settled(srv *exprdproc.Proc) (float64, error) {
	time.Sleep(time.Second)
	g, err := srv.Gauges()
	return g.RSSMiB, err
}

// open opens a session; an active one gets the products state and makes
// one call that writes. The stream stays open until ctx ends.
func open(ctx context.Context, conn *grpc.ClientConn, active bool) (exprdv1.ExprTool_SessionClient, error) {
	stream, err := exprdv1.NewExprToolClient(conn).Session(ctx)
	if err != nil {
		return nil, err
	}
	send := func(m *exprdv1.SessionRequest) error { return stream.Send(m) }
	if err := send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{}}}); err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); err != nil {
		return nil, err
	}
	if !active {
		return stream, nil
	}
	if err := send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_State{State: &exprdv1.State{StateJson: string(demo.Products)}}}); err != nil {
		return nil, err
	}
	if err := send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "c", InputJson: call}}}); err != nil {
		return nil, err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if a := m.GetAnswer(); a != nil {
			if a.GetReason() != "" {
				return nil, fmt.Errorf("the call failed: %s", a.GetAnswerJson())
			}
			return stream, nil
		}
	}
}
