package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
)

// The evaluator's cases (evaluator/testdata/calls.json) run here again
// through the gRPC API: every case on a Session, and the cases a unary Call
// can run on Call. Only what crosses the wire is compared: the answer, the
// writes and the client-run calls (the state after is the evaluator tests').

func loadCases(t *testing.T) []evaltest.Case {
	t.Helper()
	cases, err := evaltest.LoadCases("../evaluator/testdata/calls.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for i := range cases {
		cases[i].StateAfter = nil
	}
	return cases
}

// casesServer serves the catalogue's server-run functions.
func casesServer(t *testing.T) exprdv1.ExprToolClient {
	var fns []evaluator.Function
	for _, f := range evaltest.Functions() {
		if f.Runner == evaluator.RunServer {
			fns = append(fns, f)
		}
	}
	return startServer(t, server.WithFunctions(fns...), server.WithClock(evaltest.StepClock))
}

// wireSettings declares the case's functions as a client would: server-run
// ones by name, client-run ones in full.
func wireSettings(c evaltest.Case) *exprdv1.Settings {
	cat := evaltest.Functions()
	decl := func(name string) *exprdv1.Function {
		f := cat[name]
		if f.Runner == evaluator.RunServer {
			return &exprdv1.Function{Name: name, Runner: exprdv1.Function_RUNNER_SERVER}
		}
		return &exprdv1.Function{Name: name, Runner: exprdv1.Function_RUNNER_CLIENT, Description: f.Description,
			InputSchemaJson: string(f.InputSchema), OutputSchemaJson: string(f.OutputSchema)}
	}
	s := &exprdv1.Settings{Read: c.Config.Read, Note: c.Config.Note}
	for _, name := range c.Config.Functions {
		s.Functions = append(s.Functions, decl(name))
	}
	if c.Config.ToolFunctions != nil {
		s.ToolFunctions = &exprdv1.FunctionSet{}
		for _, name := range c.Config.ToolFunctions {
			f := decl(name)
			if slices.Contains(c.Config.Functions, name) {
				f = &exprdv1.Function{Name: name}
			}
			s.ToolFunctions.Functions = append(s.ToolFunctions.Functions, f)
		}
	}
	return s
}

func wireBudgets(c evaltest.Case) *exprdv1.Budgets {
	l := c.Limits
	return &exprdv1.Budgets{
		TimeoutMs: l.TimeoutMS, MaxIterations: l.MaxIterations, MemoryBudget: l.MemoryBudget,
		MaxSourceLength: l.MaxSourceLength, MaxNodes: l.MaxNodes, MaxStringLength: l.MaxStringLength,
		MaxArrayLength: l.MaxArrayLength, MaxReadChars: l.MaxReadChars, FunctionTimeoutMs: l.FunctionTimeoutMS,
		MaxSteps: l.MaxSteps, MaxAllocBytes: l.MaxAllocBytes, MaxFunctionCalls: l.MaxFunctionCalls,
	}
}

func TestCasesOverSession(t *testing.T) {
	t.Parallel()
	c := casesServer(t)
	for _, tc := range loadCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			a, writes, calls := runOverSession(t, c, tc)
			if err := evaltest.Check(tc, a, writes, calls, nil); err != nil {
				t.Error(err)
			}
		})
	}
}

func runOverSession(t *testing.T, c exprdv1.ExprToolClient, tc evaltest.Case) (evaluator.Answer, []evaluator.Write, []evaltest.ClientCall) {
	s := openSession(t, c, &exprdv1.Open{Settings: wireSettings(tc), Budgets: wireBudgets(tc)})
	s.state(string(tc.StateJSON()))
	s.call("case", string(tc.InputJSON()))
	var writes []evaluator.Write
	var calls []evaltest.ClientCall
	confirms := 0
	for {
		m := s.recv()
		switch {
		case m.GetStepWrite() != nil:
			w := m.GetStepWrite()
			writes = append(writes, evaluator.Write{Step: int(w.GetStep()), Path: w.GetPath(), ValueJSON: []byte(w.GetValueJson())})
		case m.GetConfirmRequest() != nil:
			ok := confirms >= len(tc.Confirm) || tc.Confirm[confirms]
			confirms++
			s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_ConfirmReply{ConfirmReply: &exprdv1.ConfirmReply{
				CallId: "case", Step: m.GetConfirmRequest().GetStep(), Accepted: ok,
			}}})
		case m.GetFunctionCall() != nil:
			fc := m.GetFunctionCall()
			var args map[string]any
			if err := json.Unmarshal([]byte(fc.GetArgsJson()), &args); err != nil {
				t.Fatalf("function call args %s: %v", fc.GetArgsJson(), err)
			}
			calls = append(calls, evaltest.ClientCall{Name: fc.GetName(), Args: args})
			res, err, hang := evaltest.ClientReply(fc.GetName(), args)
			if hang {
				continue // the server's function timeout answers
			}
			r := &exprdv1.FunctionResult{CallId: "case", FunctionCallId: fc.GetFunctionCallId()}
			if err != nil {
				r.Error = err.Error()
			} else {
				b, err := json.Marshal(res)
				if err != nil {
					t.Fatal(err)
				}
				r.ResultJson = string(b)
			}
			s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: r}})
		case m.GetAnswer() != nil:
			a, err := evaltest.ParseAnswer([]byte(m.GetAnswer().GetAnswerJson()))
			if err != nil {
				t.Fatal(err)
			}
			if string(a.Reason()) != m.GetAnswer().GetReason() {
				t.Errorf("Answer.reason %q differs from answer_json's %q", m.GetAnswer().GetReason(), a.Reason())
			}
			return a, writes, calls
		default:
			t.Fatalf("unexpected %v", m)
		}
	}
}

func TestCasesOverUnaryCall(t *testing.T) {
	t.Parallel()
	c := casesServer(t)
	n := 0
	for _, tc := range loadCases(t) {
		if !tc.Unary() {
			continue
		}
		n++
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resp, err := c.Call(ctx, &exprdv1.CallRequest{Settings: wireSettings(tc), Budgets: wireBudgets(tc), StateJson: string(tc.StateJSON()), InputJson: string(tc.InputJSON())})
			if err != nil {
				t.Fatal(err)
			}
			a, err := evaltest.ParseAnswer([]byte(resp.GetAnswerJson()))
			if err != nil {
				t.Fatal(err)
			}
			var writes []evaluator.Write
			for _, w := range resp.GetWrites() {
				writes = append(writes, evaluator.Write{Step: int(w.GetStep()), Path: w.GetPath(), ValueJSON: []byte(w.GetValueJson())})
			}
			if err := evaltest.Check(tc, a, writes, nil, nil); err != nil {
				t.Error(err)
			}
		})
	}
	if n == 0 {
		t.Fatal("no case can run unary")
	}
}

// Every reason of evaluator.Reasons is produced through the gRPC API by
// some case.
func TestCasesCoverEveryReason(t *testing.T) {
	t.Parallel()
	seen := map[evaluator.Reason]bool{}
	for _, tc := range loadCases(t) {
		seen[tc.Want.Reason] = true
	}
	for _, r := range evaluator.Reasons {
		if !seen[r] {
			t.Errorf("no case produces %q", r)
		}
	}
}
