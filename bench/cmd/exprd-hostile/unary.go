package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// The unary cases: 2 (CodeMode on a 5 MiB tool answer), 4 (a search
// flood) and 5 (many distinct callers).

// bigAnswers is case 2: concurrent CodeMode Executes of the tool that
// answers 5 MiB. Every one must be answered; an error result is fine.
func bigAnswers(ctx context.Context, e *env, t *tally) (string, error) {
	n := e.cfg.codemodeCalls
	conns, err := dialPool(e.addr, caseSource(2), 4, withToken(e.tokens.cases[2]))
	if err != nil {
		return "", err
	}
	defer conns.Close()
	// exprd's rate limiter (1,000/s a caller) refuses some of a loop this
	// fast: RESOURCE_EXHAUSTED is a bound answering, wanted too.
	answered := func(c codes.Code) bool { return c == codes.ResourceExhausted }
	req := &exprdv1.ExecuteRequest{
		Code:      `codemode.CallTool("` + bigTool + `", {})`,
		Tools:     []string{bigTool},
		TimeoutMs: uint32(e.cfg.deadline.Milliseconds() / 2),
	}
	executeFlood(ctx, e, t, conns, n, req, answered, false, func(*exprdv1.ExecuteResponse) bool { return true })
	return fmt.Sprintf("%d concurrent CodeMode Executes of a tool answering %.1f MiB, in a loop",
		n, float64(e.cfg.bigToolBytes)/(1<<20)), nil
}

// searchFlood is case 4: SearchTools with 10 MB queries, half of the
// clients with the usual deadline (INVALID_ARGUMENT wanted), half with
// 100 ms (INVALID_ARGUMENT, or their own deadline running out while the
// 10 MB are still being sent: counted apart, not as a missing answer).
func searchFlood(ctx context.Context, e *env, t *tally) (string, error) {
	n := e.cfg.searchClients
	conns, err := dialPool(e.addr, caseSource(4), (n+3)/4, withToken(e.tokens.cases[4]))
	if err != nil {
		return "", err
	}
	defer conns.Close()
	req := &exprdv1.SearchToolsRequest{Query: e.searchQuery}
	// INVALID_ARGUMENT wanted; the rate limiter's RESOURCE_EXHAUSTED is a
	// bound answering too.
	invalid := func(c codes.Code) bool { return c == codes.InvalidArgument || c == codes.ResourceExhausted }
	var wg sync.WaitGroup
	for i := range n {
		short := i%2 == 1
		deadline := e.cfg.deadline
		if short {
			deadline = shortDeadline
		}
		wg.Go(func() {
			c := exprdv1.NewToolRegistryClient(conns.get(i))
			for first := true; first || ctx.Err() == nil; first = false {
				cctx, cancel := context.WithTimeout(context.Background(), deadline)
				t0 := time.Now()
				_, err := c.SearchTools(cctx, req)
				cancel()
				if err != nil {
					t.rpcError(err, invalid, short, time.Since(t0))
					pauseIfRefused(err)
					continue
				}
				t.answer("answered (a query past the bound)", "", false, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d clients: ToolRegistry.SearchTools with a %.1f MB query of distinct words, half with a %v deadline, in a loop",
		n, mb(len(e.searchQuery)), shortDeadline), nil
}

const shortDeadline = 100 * time.Millisecond

// manyCallers is case 5: distinct callers, each a connection of its own
// from its own loopback address making one Describe without a token
// (UNAUTHENTICATED wanted: with auth on, the rate limiter keys callers by
// their token's name, so the case now measures what connections and
// refusals cost). It stops when every caller is done or the case's time
// is up. from is the first caller's index, so that the mix brings new
// ones.
func manyCallers(from int) func(context.Context, *env, *tally) (string, error) {
	return func(ctx context.Context, e *env, t *tally) (string, error) {
		total := e.cfg.callers
		var next, done atomic.Int64
		t0 := time.Now()
		var wg sync.WaitGroup
		for range e.cfg.callerConcurrency {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= total || ctx.Err() != nil {
						return
					}
					oneCaller(e, from+i, t)
					done.Add(1)
				}
			})
		}
		wg.Wait()
		secs := time.Since(t0).Seconds()
		return fmt.Sprintf("%d of %d distinct callers without a token (one connection and one Describe each, %d at a time) in %.1f s, %.0f/s",
			done.Load(), total, e.cfg.callerConcurrency, secs, float64(done.Load())/secs), nil
	}
}

func oneCaller(e *env, i int, t *tally) {
	t0 := time.Now()
	conn, err := dialFrom(e.addr, callerSource(i))
	if err != nil {
		t.untypedError(fmt.Errorf("dial from %v: %w", callerSource(i), err))
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
	defer cancel()
	_, err = exprdv1.NewExprToolClient(conn).Describe(ctx, &exprdv1.DescribeRequest{})
	if err != nil {
		// UNAVAILABLE: a connection refused at accept (--max-connections,
		// --max-connections-per-peer) is a bound answering too.
		t.rpcError(err, func(c codes.Code) bool {
			return c == codes.Unauthenticated || c == codes.ResourceExhausted || c == codes.Unavailable
		}, false, time.Since(t0))
		return
	}
	t.answer("Describe answered without a token", "", false, time.Since(t0))
}
