package evaluator_test

import (
	"context"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

const casesFile = "testdata/calls.json"

// caseTimeout bounds one case's run: the longest case waits on a client that
// never answers, for its lowered function timeout.
const caseTimeout = 10 * time.Second

func loadCases(t testing.TB) []evaltest.Case {
	t.Helper()
	cases, err := evaltest.LoadCases(casesFile)
	if err != nil {
		t.Fatalf("LoadCases: %v", err)
	}
	return cases
}

// TestCases runs every case of testdata/calls.json on one shared evaluator,
// as a server does.
func TestCases(t *testing.T) {
	e, err := evaluator.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			r := runCase(t, e, c)
			if err := evaltest.Check(c, r.Answer, r.Writes, r.ClientCalls, r.StateAfter); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCasesUnary runs the cases a unary Call can run (evaltest.Case.Unary)
// as the unary Call does, with client-run functions refused: they must come
// out the same, never asking the host anything.
func TestCasesUnary(t *testing.T) {
	e := newEvaluator(t)
	n := 0
	for _, c := range loadCases(t) {
		if !c.Unary() {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			r := runCase(t, e, c, evaluator.ClientUnreachable())
			if err := evaltest.Check(c, r.Answer, r.Writes, r.ClientCalls, r.StateAfter); err != nil {
				t.Error(err)
			}
			if len(r.Confirms) > 0 || len(r.ClientCalls) > 0 {
				t.Errorf("host: got confirms %v and client calls %v, want none", r.Confirms, r.ClientCalls)
			}
		})
	}
	if n == 0 {
		t.Error("no case can run unary")
	}
}

// runCase runs c on a tool with its own step clock.
func runCase(t *testing.T, e *evaluator.Evaluator, c evaltest.Case, opts ...evaluator.ToolOption) evaltest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	r, err := evaltest.Run(ctx, e, c, append(opts, evaluator.WithClock(evaltest.StepClock()))...)
	if err != nil {
		t.Fatal(err)
	}
	if r.Answer.Cancelled {
		t.Fatalf("the call ran past %v", caseTimeout)
	}
	return r
}
