package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// Cases 9 to 12: programs that build, call and match until a budget
// stops them.
const (
	// codemodeStringsExpr would build 20,000 strings of 100,000 bytes: 2 GB.
	codemodeStringsExpr = `len(map(1..20000, repeat("x", 100000)))`
	// exprtoolStringsExpr would build 100,000 of them: 10 GB.
	exprtoolStringsExpr = `len(map(1..100000, repeat("x", 100000)))`
	// clientFnExpr calls the client-run f a thousand times.
	clientFnExpr = `len(map(1..1000, f({})))`
	// serverFnExpr calls math.add, a UTCP tool, a thousand times.
	serverFnExpr = `len(map(1..1000, add({a: #, b: 1})))`
	uniqExpr     = `len(uniq(1..30000))`
	// matchExpr matches a pattern built at run time, 300 copies of .*a
	// then b, over 100,000 a's: backtracking would take for ever; RE2 is
	// linear but for bytes × instructions.
	matchExpr = `repeat("a", 100000) matches repeat(".*a", 300) + "b"`
)

// stepCall is the input of a call whose one step sets scopes.root.n to expr.
func stepCall(expr string) string {
	b, _ := json.Marshal(map[string]any{"steps": []any{map[string]any{"set": "scopes.root.n", "expr": expr}}})
	return string(b)
}

// readCall is the input of a call that reads expr.
func readCall(expr string) string {
	b, _ := json.Marshal(map[string]any{"read": expr})
	return string(b)
}

func budgetExceeded(a *exprdv1.Answer) bool { return a.GetReason() == "budget-exceeded" }

// codemodeStrings is case 9: concurrent CodeMode Executes of a program
// building gigabytes of strings; each must stop budget-exceeded.
func codemodeStrings(ctx context.Context, e *env, t *tally) (string, error) {
	conns, err := dialPool(e.addr, caseSource(9), 2, withToken(e.tokens.cases[9]))
	if err != nil {
		return "", err
	}
	defer conns.Close()
	req := &exprdv1.ExecuteRequest{Code: codemodeStringsExpr, Tools: []string{"math.add"}, TimeoutMs: uint32(e.cfg.deadline.Milliseconds() / 2)}
	executeFlood(ctx, e, t, conns, e.cfg.codemodeStrings, req, nil, true,
		func(r *exprdv1.ExecuteResponse) bool { return r.GetError().GetReason() == "budget-exceeded" })
	return fmt.Sprintf("%d concurrent CodeMode Executes of %s (2 GB if it ran to the end), in a loop", e.cfg.codemodeStrings, codemodeStringsExpr), nil
}

// executeFlood is n clients making the CodeMode Execute req over conns in
// a loop, each bounded by the run's deadline; answered says which codes
// are wanted answers, right whether a result is, and withValue whether a
// result's value is shown.
func executeFlood(ctx context.Context, e *env, t *tally, conns pool, n int, req *exprdv1.ExecuteRequest,
	answered func(codes.Code) bool, withValue bool, right func(*exprdv1.ExecuteResponse) bool) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := exprdv1.NewCodeModeClient(conns.get(i))
			for first := true; first || ctx.Err() == nil; first = false {
				cctx, cancel := context.WithTimeout(context.Background(), e.cfg.deadline)
				t0 := time.Now()
				resp, err := c.Execute(cctx, req)
				cancel()
				if err != nil {
					t.rpcError(err, answered, false, time.Since(t0))
					pauseIfRefused(err)
					continue
				}
				kind, msg := "result: a value", ""
				if withValue {
					msg = resp.GetValueJson()
				}
				if r := resp.GetError().GetReason(); r != "" {
					kind, msg = "result: error "+r, resp.GetError().GetMessage()
				}
				t.answer(kind, msg, right(resp), time.Since(t0))
			}
		})
	}
	wg.Wait()
}

// unaryFlood is n clients of case c making the unary Call req in a loop,
// each bounded by deadline; right says whether an answer is wanted.
func unaryFlood(ctx context.Context, e *env, t *tally, c, n int, what string, req *exprdv1.CallRequest, deadline time.Duration, right func(*exprdv1.CallResponse) bool) error {
	conns, err := dialPool(e.addr, caseSource(c), 2, withToken(e.tokens.cases[c]))
	if err != nil {
		return err
	}
	defer conns.Close()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cl := exprdv1.NewExprToolClient(conns.get(i))
			for first := true; first || ctx.Err() == nil; first = false {
				cctx, cancel := context.WithTimeout(context.Background(), deadline)
				t0 := time.Now()
				resp, err := cl.Call(cctx, req)
				cancel()
				if err != nil {
					t.rpcError(err, nil, false, time.Since(t0))
					pauseIfRefused(err)
					continue
				}
				kind := what + ": answer"
				if r := resp.GetReason(); r != "" {
					kind += " " + r
				}
				t.answer(kind, resp.GetAnswerJson(), right(resp), time.Since(t0))
			}
		})
	}
	wg.Wait()
	return nil
}

// exprtoolStringsUnary is 10a: the 10 GB program over unary Calls.
func exprtoolStringsUnary(ctx context.Context, e *env, t *tally) (string, error) {
	req := &exprdv1.CallRequest{InputJson: stepCall(exprtoolStringsExpr)}
	err := unaryFlood(ctx, e, t, 10, e.cfg.exprtoolStrings, "Call", req, e.cfg.deadline,
		func(r *exprdv1.CallResponse) bool { return r.GetReason() == "budget-exceeded" })
	return fmt.Sprintf("%d concurrent unary Calls of %s (10 GB if it ran to the end), in a loop", e.cfg.exprtoolStrings, exprtoolStringsExpr), err
}

// exprtoolStringsSession is 10b: the same program over Session calls.
func exprtoolStringsSession(ctx context.Context, e *env, t *tally) (string, error) {
	err := callFlood(ctx, e, t, 10, e.cfg.exprtoolStrings, "Session call", stepCall(exprtoolStringsExpr), budgetExceeded)
	return fmt.Sprintf("%d Session streams calling %s, in a loop", e.cfg.exprtoolStrings, exprtoolStringsExpr), err
}

// clientFunctions is 11a: Sessions with a client-run function f whose
// every call the harness answers with about 1 MB of JSON, and a call of
// f a thousand times; the call must stop budget-exceeded.
func clientFunctions(ctx context.Context, e *env, t *tally) (string, error) {
	conns, err := dialPool(e.addr, caseSource(11), 2, withToken(e.tokens.cases[11]))
	if err != nil {
		return "", err
	}
	defer conns.Close()
	fnOpen := &exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{
		Name: "f", Description: "Answers a lot.", Runner: exprdv1.Function_RUNNER_CLIENT,
	}}}}
	call := stepCall(clientFnExpr)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for i := range e.cfg.clientFnStreams {
		wg.Go(func() {
			s, ok := open(conns.get(i), e, t, fnOpen)
			if !ok {
				return
			}
			defer s.close()
			for n := 0; n == 0 || ctx.Err() == nil; n++ {
				id := strconv.Itoa(n)
				t0 := time.Now()
				if err := s.send(callMsg(id, call)); err != nil {
					s.record(t, "call (send)", err, time.Since(t0))
					return
				}
				for {
					m, err := s.recv()
					if err != nil {
						s.record(t, "call of f", err, time.Since(t0))
						return
					}
					if fc := m.GetFunctionCall(); fc != nil {
						res := &exprdv1.FunctionResult{CallId: fc.GetCallId(), FunctionCallId: fc.GetFunctionCallId(), ResultJson: e.megabyteJSON}
						if err := s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: res}}); err != nil {
							s.record(t, "function result (send)", err, time.Since(t0))
							return
						}
						mu.Lock()
						answered++
						mu.Unlock()
						continue
					}
					if a := m.GetAnswer(); a != nil && a.GetCallId() == id {
						t.answer(answerKind(a), a.GetAnswerJson(), budgetExceeded(a), time.Since(t0))
						break
					}
					if m.GetRejected() != nil && m.GetRejected().GetKind() == "call" {
						t.answer(kindOf(m), messageOf(m), false, time.Since(t0))
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d Sessions with a client-run function f, each calling %s in a loop, the harness answering each call of f with %.1f MB of JSON (%d answers sent)",
		e.cfg.clientFnStreams, clientFnExpr, mb(len(e.megabyteJSON)), answered), nil
}

// serverFunctions is 11b: unary Calls declaring math.add (the demo's
// UTCP tool) as the server-run function add and calling it a thousand
// times; the call must stop budget-exceeded (function_calls).
func serverFunctions(ctx context.Context, e *env, t *tally) (string, error) {
	req := &exprdv1.CallRequest{
		Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{
			Name: "add", Runner: exprdv1.Function_RUNNER_SERVER, ServerName: "math.add",
		}}},
		InputJson: stepCall(serverFnExpr),
	}
	err := unaryFlood(ctx, e, t, 11, e.cfg.serverFnClients, "Call of math.add", req, e.cfg.deadline,
		func(r *exprdv1.CallResponse) bool { return r.GetReason() == "budget-exceeded" })
	return fmt.Sprintf("%d concurrent unary Calls declaring math.add as the server-run function add and calling %s, in a loop", e.cfg.serverFnClients, serverFnExpr), err
}

// slowBuiltins is case 12: two clients, one after the other in a loop,
// read len(uniq(1..30000)) and a run-time pattern's match over 100,000
// bytes, each under a 1 s deadline: a value or budget-exceeded by then.
func slowBuiltins(ctx context.Context, e *env, t *tally) (string, error) {
	conns, err := dialPool(e.addr, caseSource(12), 1, withToken(e.tokens.cases[12]))
	if err != nil {
		return "", err
	}
	defer conns.Close()
	reqs := []struct {
		what string
		req  *exprdv1.CallRequest
		want string
	}{
		{"uniq", &exprdv1.CallRequest{Settings: &exprdv1.Settings{Read: true}, InputJson: readCall(uniqExpr)}, `{"value":30000}`},
		{"matches", &exprdv1.CallRequest{Settings: &exprdv1.Settings{Read: true}, InputJson: readCall(matchExpr)}, `{"value":false}`},
	}
	var wg sync.WaitGroup
	for i := range e.cfg.slowClients {
		wg.Go(func() {
			cl := exprdv1.NewExprToolClient(conns.get(i))
			for n := 0; n < 2 || ctx.Err() == nil; n++ {
				r := reqs[(n+i)%len(reqs)]
				cctx, cancel := context.WithTimeout(context.Background(), e.cfg.slowDeadline)
				t0 := time.Now()
				resp, err := cl.Call(cctx, r.req)
				cancel()
				if err != nil {
					t.rpcError(err, func(codes.Code) bool { return false }, false, time.Since(t0))
					pauseIfRefused(err)
					continue
				}
				kind := r.what + ": answer"
				if resp.GetReason() != "" {
					kind += " " + resp.GetReason()
				} else {
					kind += " " + resp.GetAnswerJson()
				}
				t.answer(kind, resp.GetAnswerJson(), resp.GetReason() == "budget-exceeded" || resp.GetAnswerJson() == r.want, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d clients, each in a loop reading %s and %s in turn with unary Calls under a %v deadline",
		e.cfg.slowClients, uniqExpr, strings.ReplaceAll(matchExpr, `"`, "'"), e.cfg.slowDeadline), nil
}
