package utcp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/utcpall"
)

// TestRegistrationTakesTheCallersTurn: a manual's document is read (and
// converted) on a turn of the Turns its context carries, by its caller,
// as a program computes: while every turn is taken, registration waits,
// and one whose request ends meanwhile registers nothing; once a turn is
// free, it registers.
func TestRegistrationTakesTheCallersTurn(t *testing.T) {
	t.Parallel()
	r, err := utcpall.New(utcptest.LoopbackEgress)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	inputs := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}}}
	doc := utcptest.ManualOf("add", inputs, map[string]any{"call_template_type": "http", "http_method": "POST", "url": "http://127.0.0.1:1/add"})
	src := utcp.FromText(doc).AllowProtocols(utcp.TypeHTTP)
	tr := turns.NewTurns(1)
	if err := tr.Acquire(context.Background(), "other"); err != nil {
		t.Fatal(err)
	}
	caller := turns.With(membudget.WithCaller(context.Background(), "me"), tr)
	ctx, cancel := context.WithTimeout(caller, 50*time.Millisecond)
	defer cancel()
	if _, err := r.Register(ctx, "math", src); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Register while every turn is taken: %v, want the request's deadline", err)
	}
	if err := r.Deregister("math"); err == nil {
		t.Fatal("registered by a request that ended while it waited for a turn")
	}
	tr.Release("other", 0)
	if _, err := r.Register(caller, "math", src); err != nil {
		t.Fatalf("Register with a turn free: %v", err)
	}
}

// TestRegistrationReservesItsDocument: reading a caller's document holds
// utcp.DocumentMemory of the memory budget until it is done: a budget
// that cannot hold it refuses the registration (membudget's
// ExhaustedError), registering nothing, one that holds it just registers
// it, and after either nothing stays reserved. Without a caller (the
// operator's manuals) nothing is reserved.
func TestRegistrationReservesItsDocument(t *testing.T) {
	t.Parallel()
	inputs := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}}}
	doc := utcptest.ManualOf("add", inputs, map[string]any{"call_template_type": "http", "http_method": "POST", "url": "http://127.0.0.1:1/add"})
	need := utcp.DocumentMemory(len(doc))
	fits := need // the least budget whose large part holds it: a sixteenth is kept for small reservations
	for fits-fits/16 < need {
		fits++
	}
	for _, tc := range []struct {
		name    string
		budget  int64
		caller  string
		refused bool
	}{
		{"a budget that holds it", fits, "me", false},
		{"a budget a byte short", fits - 1, "me", true},
		{"no caller", need / 2, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := membudget.New(tc.budget, time.Millisecond)
			r, err := utcpall.New(utcptest.LoopbackEgress, utcp.WithMemoryBudget(b))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx := context.Background()
			if tc.caller != "" {
				ctx = membudget.WithCaller(ctx, tc.caller)
			}
			_, err = r.Register(ctx, "math", utcp.FromText(doc).AllowProtocols(utcp.TypeHTTP))
			var spent *membudget.ExhaustedError
			if tc.refused != errors.As(err, &spent) {
				t.Fatalf("Register: %v, want refused by the memory budget: %v", err, tc.refused)
			}
			if registered := r.Deregister("math") == nil; registered == tc.refused {
				t.Fatalf("registered %v, refused %v", registered, tc.refused)
			}
			if got := b.InUse(); got != 0 {
				t.Fatalf("%d bytes reserved after", got)
			}
		})
	}
}
