package main

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/demo"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// The steady client's call: the one exprd-load makes ("select the five
// lowest priced", then read how many), made with the unary ExprTool Call
// on the demo's products.
const (
	steadyInput  = `{"steps": [{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}], "read": "len(scopes.root.selected)"}`
	steadyAnswer = `{"value":5}`
)

// steadyBackoff is how long the steady client waits before it makes a
// refused call again, and steadyRetryFor how long from a call's start it
// does.
const (
	steadyBackoff  = 50 * time.Millisecond
	steadyRetryFor = 500 * time.Millisecond
)

// steady makes one Call after another until ctx ends, starting one every
// 1/rate s (or at once when the last took longer: no catching up), each
// bounded by deadline, and tallies them with their latencies. Paced, it
// stays under exprd's rate limit (1,000/s a caller), which a client
// calling back to back on an idle server passes.
//
// n, when positive, stops it after n calls (a warm-up).
func steady(ctx context.Context, conn *grpc.ClientConn, deadline time.Duration, rate float64, n int) *tally {
	t := newTally()
	c := exprdv1.NewExprToolClient(conn)
	req := &exprdv1.CallRequest{
		Settings:  &exprdv1.Settings{Read: true},
		StateJson: string(demo.Products),
		InputJson: steadyInput,
	}
	every := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for ctx.Err() == nil && (n <= 0 || t.requests < n) {
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return t
			case <-time.After(wait):
			}
		}
		next = time.Now().Add(every)
		cctx, cancel := context.WithTimeout(context.Background(), deadline)
		t0 := time.Now()
		resp, err := c.Call(cctx, req)
		// A call refused RESOURCE_EXHAUSTED (the server short of memory
		// for now) is made again after a back-off within its deadline, as
		// a well-behaved client does; its latency is the whole wait.
		for status.Code(err) == codes.ResourceExhausted && time.Until(t0.Add(steadyRetryFor)) > steadyBackoff {
			t.retried(err)
			time.Sleep(steadyBackoff)
			resp, err = c.Call(cctx, req)
		}
		d := time.Since(t0)
		cancel()
		if err != nil {
			t.rpcError(err, func(codes.Code) bool { return false }, false, d)
			continue
		}
		ok := resp.GetAnswerJson() == steadyAnswer
		kind := "answer {\"value\":5}"
		if !ok {
			kind = "answer " + resp.GetAnswerJson()
		}
		t.answer(kind, "", ok, d)
	}
	return t
}
