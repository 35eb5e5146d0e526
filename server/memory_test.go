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
	"github.com/exprd/exprd/server/auth"
)

// TestMemoryBudgetRefusesStates: with the server's memory budget spent, a
// state is refused RESOURCE_EXHAUSTED (QuotaFailure memory_budget) on a
// Session, which goes on with its state as it was, and on a Call; a state
// within the budget is taken, and an ended session gives its memory back.
func TestMemoryBudgetRefusesStates(t *testing.T) {
	budget := membudget.New(400_000, time.Millisecond)
	c := startServer(t, server.WithMemoryBudget(budget))
	big := `{"a": "` + strings.Repeat("x", 384_000) + `"}` // ~480 KB estimated
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

// TestMemoryCallerShare: one caller holds at most its share of the memory
// budget (membudget's LimitCallers, exprd's --memory-caller-share), over
// all its sessions: its state past the share is refused
// RESOURCE_EXHAUSTED (memory_budget) saying so, while another caller's
// state fits, and what the first gives back it may take again.
func TestMemoryCallerShare(t *testing.T) {
	budget := membudget.New(10_000_000, time.Millisecond).LimitCallers(0.5)
	tokens, err := auth.ParseTokens(strings.NewReader("alice " + aliceToken + " *\nbob " + bobToken + " *"))
	if err != nil {
		t.Fatal(err)
	}
	c := startServer(t, server.WithMemoryBudget(budget), server.WithAuth(tokens))
	// 1.28 MB kept, as much again while it is decoded, and its message
	// 2.05 MB while it is received (the receive gate's, in the caller's
	// share): a share of 5 MB takes a second state beside the first
	// (4.61 MB), not a third beside two (5.89 MB). The budget's large part
	// (9.38 MB) holds alice's two and bob's, received and decoded.
	big := `{"a": "` + strings.Repeat("x", 1_024_000) + `"}`
	open := &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}}
	// One state at a time: each is decoded alone.
	var alice []*rawSession
	for i := range 3 {
		s := openSessionCtx(t, bearerCtx(aliceToken), c, open)
		s.state(big)
		alice = append(alice, s)
		if i == 2 {
			break
		}
		if got := s.read("len(scopes.root.a)"); got != `{"value":1024000}` {
			t.Fatalf("alice's state %d: got %s", i+1, got)
		}
	}
	m := alice[2].recv()
	st := rejectedStatus(m.GetRejected())
	if st.Code() != codes.ResourceExhausted || quotaSubject(st) != "memory_budget" || !strings.Contains(st.Message(), "its share") {
		t.Fatalf("alice's third state: got %v, want Rejected RESOURCE_EXHAUSTED memory_budget saying she holds her share", m)
	}

	bob := openSessionCtx(t, bearerCtx(bobToken), c, open)
	bob.state(big)
	if got := bob.read("len(scopes.root.a)"); got != `{"value":1024000}` {
		t.Fatalf("bob's state while alice holds her share: got %s", got)
	}

	if err := alice[0].stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := alice[0].stream.Recv(); err != nil {
			break
		}
	}
	// Her first session's state is given back when it ends, and her
	// third is taken.
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() > 2_600_000 { // alice's second state and bob's (1.28 MB each)
		if time.Now().After(deadline) {
			t.Fatalf("in use %d after alice's first session ended", budget.InUse())
		}
		time.Sleep(time.Millisecond)
	}
	alice[2].state(big)
	if got := alice[2].read("len(scopes.root.a)"); got != `{"value":1024000}` {
		t.Fatalf("alice's third state once her first session ended: got %s", got)
	}
}

// TestStateOfSmallObjectsReservesWhatItHolds: a state is held to what its
// values take in Go, not to its bytes of JSON: 20,000 objects of one
// entry are 160 KB of JSON and 7 MB of Go, refused by a 4 MB budget
// (counted at 8 bytes a byte and 64 an object, it reserved 2.6 MB and
// was taken), while 2,000 of them are taken.
func TestStateOfSmallObjectsReservesWhatItHolds(t *testing.T) {
	budget := membudget.New(4_000_000, time.Millisecond)
	c := startServer(t, server.WithMemoryBudget(budget))
	objects := func(n int) string {
		return `{"a":[` + strings.TrimSuffix(strings.Repeat(`{"a":1},`, n), ",") + `]}`
	}
	s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}})
	s.state(objects(2_000))
	if got := s.read("len(scopes.root.a)"); got != `{"value":2000}` {
		t.Fatalf("2,000 small objects: got %s", got)
	}
	s.state(objects(20_000))
	m := s.recv()
	st := rejectedStatus(m.GetRejected())
	if st.Code() != codes.ResourceExhausted || quotaSubject(st) != "memory_budget" {
		t.Fatalf("20,000 small objects in a 4 MB budget: got %v, want Rejected RESOURCE_EXHAUSTED memory_budget", m)
	}
	if got := s.read("len(scopes.root.a)"); got != `{"value":2000}` {
		t.Errorf("after the refusal: got %s, want the state as it was", got)
	}
}
