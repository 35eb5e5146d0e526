package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
)

// The receive gate as exprd wires it (its tap tags each stream for the
// gate) releases a Session's large message once the handler asks for the
// next one, while the session goes on: the same state sent again and
// again holds the same memory, not its messages added up until the
// stream ends.
func TestGateReleasesSessionMessages(t *testing.T) {
	budget := membudget.New(256<<20, time.Millisecond)
	c := startServer(t, server.WithMemoryBudget(budget), server.WithFlowControlWindows(64<<10, 1<<20))
	s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}})
	pad := strings.Repeat("x", 200_000) // a message three windows long
	var inUse int64
	for i := range 4 {
		s.state(fmt.Sprintf(`{"a": %q, "n": %d}`, pad, i))
		if got, want := s.read("scopes.root.n"), fmt.Sprintf(`{"value":%d}`, i); got != want {
			t.Fatalf("read: got %s, want %s", got, want)
		}
		if i == 1 {
			inUse = budget.InUse()
			continue
		}
		for deadline := time.Now().Add(2 * time.Second); i > 1 && budget.InUse() != inUse; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after state %d, %d bytes in use, after state 1 %d: the gate holds the messages the handler is done with", i, budget.InUse(), inUse)
			}
		}
	}
}
