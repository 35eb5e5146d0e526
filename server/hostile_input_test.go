package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp/hostiletest"
)

// A hostile OpenAPI document registered over the API is refused
// INVALID_ARGUMENT, naming the bound it passes, and costs a bounded
// amount: the process allocates a small multiple of the document, and
// the registry is as it was. Not parallel: the allocation counter is the
// process's.
func TestHostileOpenAPIDocumentIsRefused(t *testing.T) {
	c, _ := registryClient(t)
	doc := hostiletest.SharedRefsDocument(100, 3000)
	var err error
	got := allocatedDuring(func() {
		_, err = c.RegisterManual(context.Background(), inline("big", doc, false))
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want INVALID_ARGUMENT", err)
	}
	if got > 64<<20 {
		t.Errorf("registering a %d-byte document allocated %d bytes, want at most 64 MiB", len(doc), got)
	}
	if tools := listed(t, c, "big"); len(tools) != 0 {
		t.Errorf("the refused manual left tools %v", tools)
	}
	t.Logf("%d bytes of document: %v; %d bytes allocated", len(doc), err, got)
}

// Builtins whose cost grows faster than their input answer within the
// time budget's order, through a unary Call under a caller's deadline: a
// uniq of 30,000 numbers (9.9 s of a core in expr's own, quadratic) runs,
// a match of a costly pattern over a long string is refused before it
// runs, and another caller's 1+1 is answered meanwhile.
func TestCostlyBuiltinsStayInTheirBudget(t *testing.T) {
	t.Parallel()
	// A time budget of a second: the uniq takes 30 ms alone, and ran past
	// the default 100 ms under -race beside the package's other tests in
	// CI, against 9.9 s when it was quadratic; the match is refused
	// before it runs whatever the budget.
	budgets := evaluator.DefaultBudgets()
	budgets.Timeout = time.Second
	c := startServer(t, server.WithBudgets(budgets))
	for _, tt := range []struct {
		name, read, want string
	}{
		{"uniq of 30,000 numbers", `len(uniq(1..30000))`, `{"value":30000}`},
		{"a costly match built at run time", `repeat(\"a\", 100000) matches repeat(\".*a\", 300) + \"b\"`, "bytes × instructions"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			other := make(chan error, 1)
			go func() {
				resp, err := c.Call(ctx, &exprdv1.CallRequest{Settings: &exprdv1.Settings{Read: true}, InputJson: `{"read": "1 + 1"}`})
				if err == nil && resp.GetAnswerJson() != `{"value":2}` {
					err = errors.New("1 + 1 answered " + resp.GetAnswerJson())
				}
				other <- err
			}()
			resp, err := c.Call(ctx, &exprdv1.CallRequest{Settings: &exprdv1.Settings{Read: true}, InputJson: `{"read": "` + tt.read + `"}`})
			if err != nil {
				t.Fatalf("got %v, want an answer within the deadline", err)
			}
			if !strings.Contains(resp.GetAnswerJson(), tt.want) {
				t.Errorf("got %s, want it to hold %s", resp.GetAnswerJson(), tt.want)
			}
			if err := <-other; err != nil {
				t.Errorf("the other caller: %v", err)
			}
		})
	}
}
