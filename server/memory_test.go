package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
)

// TestMemoryBudgetRefusesStates: with the server's memory budget spent, a
// state is refused RESOURCE_EXHAUSTED (QuotaFailure memory_budget) on a
// Session, which goes on with its state as it was, and on a Call; a state
// within the budget is taken, and an ended session gives its memory back.
func TestMemoryBudgetRefusesStates(t *testing.T) {
	budget := membudget.New(400_000, time.Millisecond)
	c := startServer(t, server.WithMemoryBudget(budget))
	big := `{"a": "` + strings.Repeat("x", 60_000) + `"}` // ~480 KB estimated
	small := `{"n": 7}`

	s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}})
	s.state(small)
	if got := s.read("scopes.root.n"); got != `{"value":7}` {
		t.Fatalf("read: got %s, want {\"value\":7}", got)
	}
	s.state(big)
	m := s.recv()
	r := m.GetRejected()
	st := rejectedStatus(r)
	if r == nil || st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "memory budget") {
		t.Fatalf("got %v, want Rejected RESOURCE_EXHAUSTED naming the memory budget", m)
	}
	if subject := quotaSubject(st); subject != "memory_budget" {
		t.Errorf("QuotaFailure subject: got %q, want memory_budget", subject)
	}
	if got := s.read("scopes.root.n"); got != `{"value":7}` {
		t.Errorf("after the refusal: got %s, want the state as it was", got)
	}

	_, err := c.Call(context.Background(), &exprdv1.CallRequest{Settings: &exprdv1.Settings{Read: true}, StateJson: big, InputJson: `{"read": "1"}`})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || quotaSubject(st) != "memory_budget" {
		t.Fatalf("Call with a state over the budget: got %v, want RESOURCE_EXHAUSTED memory_budget", err)
	}
	resp, err := c.Call(context.Background(), &exprdv1.CallRequest{Settings: &exprdv1.Settings{Read: true}, StateJson: small, InputJson: `{"read": "scopes.root.n"}`})
	if err != nil || resp.GetAnswerJson() != `{"value":7}` {
		t.Fatalf("Call within the budget: got %v, %v", resp, err)
	}

	held := budget.InUse()
	if held == 0 {
		t.Fatalf("the open session reserves nothing")
	}
	if err := s.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.stream.Recv(); err != nil {
			break
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("in use %d after the session ended, want 0", budget.InUse())
		}
		time.Sleep(time.Millisecond)
	}
}
