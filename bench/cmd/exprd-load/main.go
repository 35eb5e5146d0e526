// Command exprd-load is exprd's load and soak harness. It starts an exprd
// binary (built without -race), holds open Session streams that make calls
// for a while, and reports calls/s, p50 and p99 latency, errors, and the
// server's RSS and goroutines before, during and after; with --idle it also
// holds that many idle sessions and reports the RSS they cost.
//
//	go build -o bin/exprd ./cmd/exprd
//	go run ./cmd/exprd-load --exprd bin/exprd --streams 200 --duration 60s --idle 10000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "exprd-load:", err)
		os.Exit(1)
	}
}

// The call each stream makes: "select the five lowest priced" (a step
// with fromPairs over sortBy) with a read, on the demo state.
const callInput = `{"steps": [{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}], "read": "len(scopes.root.selected)"}`

type report struct {
	Streams        int     `json:"streams"`
	Seconds        float64 `json:"seconds"`
	Calls          int64   `json:"calls"`
	CallsPerSecond float64 `json:"calls_per_second"`
	P50Millis      float64 `json:"p50_ms"`
	P99Millis      float64 `json:"p99_ms"`
	Errors         int64   `json:"errors"`
	RSSBefore      float64 `json:"rss_mib_before"`
	RSSDuring      float64 `json:"rss_mib_during"`
	RSSAfter       float64 `json:"rss_mib_after"`
	GoroutinesPre  float64 `json:"goroutines_before"`
	GoroutinesPost float64 `json:"goroutines_after"`
	IdleSessions   int     `json:"idle_sessions,omitempty"`
	IdleRSS        float64 `json:"idle_rss_mib,omitempty"`
	IdleRSSPerSess float64 `json:"idle_rss_kib_per_session,omitempty"`
}

func run() error {
	bin := flag.String("exprd", "bin/exprd", "the exprd binary to start")
	streams := flag.Int("streams", 200, "concurrent Session streams making calls")
	conns := flag.Int("conns", 8, "connections the streams share")
	duration := flag.Duration("duration", 60*time.Second, "how long the streams make calls")
	idle := flag.Int("idle", 0, "idle sessions to hold after the load")
	maxErrors := flag.Int64("max-errors", 0, "exit non-zero past this many errors")
	maxGoroutineGrowth := flag.Float64("max-goroutine-growth", 10, "exit non-zero when goroutines after exceed before by more")
	flag.Parse()

	srv, err := exprdproc.Start(*bin, prefixed{os.Stderr},
		"--demo", "--max-sessions", "50000", "--max-streams-per-connection", "100000", "--rate-limit", "100000", "--rate-burst", "100000")
	if err != nil {
		return err
	}
	defer srv.Stop()
	r := report{Streams: *streams}
	before, err := srv.Gauges()
	if err != nil {
		return err
	}
	r.RSSBefore, r.GoroutinesPre = before.RSSMiB, before.Goroutines

	clients, err := dial(srv.Addr, *conns)
	if err != nil {
		return err
	}
	var calls, errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *streams {
		wg.Go(func() {
			mine, err := loop(ctx, exprdv1.NewExprToolClient(clients[i%len(clients)]), &calls)
			if err != nil {
				errs.Add(1)
				fmt.Fprintln(os.Stderr, "stream:", err)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	time.Sleep(*duration / 2)
	during, _ := srv.Gauges()
	r.RSSDuring = during.RSSMiB
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.Calls, r.Errors = calls.Load(), errs.Load()
	r.CallsPerSecond = float64(r.Calls) / r.Seconds
	slices.Sort(lat)
	if len(lat) > 0 {
		r.P50Millis = float64(lat[len(lat)/2].Microseconds()) / 1000
		r.P99Millis = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	}
	// Streams and connections closed, the server's goroutines go back to
	// their baseline.
	for _, c := range clients {
		c.Close()
	}
	time.Sleep(2 * time.Second)
	after, _ := srv.Gauges()
	r.RSSAfter, r.GoroutinesPost = after.RSSMiB, after.Goroutines

	if *idle > 0 {
		idleClients, err := dial(srv.Addr, max(*idle/200, 1))
		if err != nil {
			return err
		}
		defer func() {
			for _, c := range idleClients {
				c.Close()
			}
		}()
		if err := holdIdle(srv, idleClients, *idle, &r); err != nil {
			return err
		}
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Println(string(out))
	if r.Errors > *maxErrors {
		return fmt.Errorf("%d errors, over %d", r.Errors, *maxErrors)
	}
	if r.GoroutinesPost > r.GoroutinesPre+*maxGoroutineGrowth {
		return fmt.Errorf("goroutines went from %v to %v", r.GoroutinesPre, r.GoroutinesPost)
	}
	return nil
}

// loop opens a session and makes calls one after another until ctx ends.
func loop(ctx context.Context, c exprdv1.ExprToolClient, calls *atomic.Int64) ([]time.Duration, error) {
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Session(sctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}}}}); err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); err != nil {
		return nil, err
	}
	var lat []time.Duration
	for n := 0; ctx.Err() == nil; n++ {
		id := strconv.Itoa(n)
		t0 := time.Now()
		if err := stream.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: id, InputJson: callInput}}}); err != nil {
			return lat, err
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				return lat, err
			}
			if a := m.GetAnswer(); a != nil {
				if a.GetAnswerJson() != `{"value":5}` {
					return lat, fmt.Errorf("call %s: got %s", id, a.GetAnswerJson())
				}
				break
			}
		}
		lat = append(lat, time.Since(t0))
		calls.Add(1)
	}
	if err := stream.CloseSend(); err != nil {
		return lat, err
	}
	_, err = stream.Recv()
	if err == io.EOF {
		err = nil
	}
	return lat, err
}

// holdIdle opens n sessions that do nothing and reports the RSS they add.
func holdIdle(srv *exprdproc.Proc, clients []*grpc.ClientConn, n int, r *report) error {
	before, err := srv.Gauges()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range n {
		stream, err := exprdv1.NewExprToolClient(clients[i%len(clients)]).Session(ctx)
		if err != nil {
			return err
		}
		if err := stream.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{}}}); err != nil {
			return err
		}
		if _, err := stream.Recv(); err != nil {
			return fmt.Errorf("idle session %d: %w", i, err)
		}
	}
	time.Sleep(time.Second)
	after, err := srv.Gauges()
	if err != nil {
		return err
	}
	r.IdleSessions, r.IdleRSS = n, after.RSSMiB
	r.IdleRSSPerSess = (after.RSSMiB - before.RSSMiB) * 1024 / float64(n)
	return nil
}

func dial(addr string, n int) ([]*grpc.ClientConn, error) {
	var out []*grpc.ClientConn
	for range n {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// prefixed writes the server's log lines to w marked as exprd's.
type prefixed struct{ w io.Writer }

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := fmt.Fprint(p.w, "exprd: ", string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
