package utcp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
)

// TestToolAnswersReserveMemory: a call reserves what it reads of its
// answer from the memory budget, whether the provider says the length or
// not; an answer the budget cannot hold fails the call (ReasonMemory),
// and every call gives its reservation back when it returns.
func TestToolAnswersReserveMemory(t *testing.T) {
	t.Parallel()
	answer := `{"s":"` + strings.Repeat("x", 200_000) + `"}`
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", "200008")
		}
		_, _ = io.WriteString(w, answer)
	})
	for _, tt := range []struct {
		name    string
		budget  int64
		query   string
		wantErr bool
	}{
		{"length known, within", 1 << 20, "", false},
		{"length known, over", 500_000, "", true},
		{"chunked, within", 1 << 20, "?chunked=1", false},
		{"chunked, over", 500_000, "?chunked=1", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := membudget.New(tt.budget, time.Millisecond)
			r := utcptest.NewRegistry(t, utcp.WithMemoryBudget(b))
			utcptest.Register(t, r, "big", utcptest.ManualOf("get", nil, map[string]any{"call_template_type": "http", "http_method": "GET", "url": p.URL + "/" + tt.query}))
			v, err := r.Call(context.Background(), "big.get", map[string]any{})
			var te *utcp.TransportError
			switch {
			case tt.wantErr && (!errors.As(err, &te) || te.Reason != utcp.ReasonMemory):
				t.Fatalf("got %v, want a memory-budget failure", err)
			case !tt.wantErr && err != nil:
				t.Fatalf("got %v, want the answer", err)
			case !tt.wantErr && len(v.(map[string]any)["s"].(string)) != 200_000:
				t.Fatalf("got a wrong answer")
			}
			if got := b.InUse(); got != 0 {
				t.Errorf("in use %d after the call, want 0", got)
			}
		})
	}
}
