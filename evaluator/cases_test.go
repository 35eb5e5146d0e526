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

// overTimeRetries is how often a case that ran out of the (wall-clock) time
// budget it did not expect runs again: a loaded machine, not the evaluator.
const overTimeRetries = 2

// runCase runs c, again when it ran out of time it should not have needed.
func runCase(t *testing.T, e *evaluator.Evaluator, c evaltest.Case, opts ...evaluator.ToolOption) evaltest.Result {
	t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
		r, err := evaltest.Run(ctx, e, c, opts...)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if r.Answer.Cancelled {
			t.Fatalf("the call ran past %v", caseTimeout)
		}
		if try == overTimeRetries || !evaltest.OverTime(c, r.Answer) {
			return r
		}
		t.Logf("try %d ran out of time (%s): running it again", try, r.Answer.Err.Message)
	}
}
