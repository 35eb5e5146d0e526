package openaicompat_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// A reply is read only as far as the memory budget holds twice its bytes;
// past that it fails with the budget's error, and what it held is given
// back either way.
func TestReplyMemory(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	body := `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", size) + `"},"finish_reason":"stop"}]}`
	tests := []struct {
		name   string
		turn   scripted.Turn
		stream bool
		budget int64
		spent  bool
	}{
		{"a reply within the budget", scripted.Turn{Body: body}, false, 16 * size, false},
		{"a reply past the budget", scripted.Turn{Body: body}, false, size, true},
		{"a stream within the budget", scripted.Turn{TextChunks: splitN(size, 4)}, true, 16 * size, false},
		{"a stream past the budget", scripted.Turn{TextChunks: splitN(size, 4)}, true, size, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			budget := membudget.New(tt.budget, 10*time.Millisecond)
			p := provider(t, serve(t, tt.turn), func(c *openaicompat.ProviderConfig) { c.Stream = &tt.stream },
				openaicompat.WithMemoryBudget(budget))
			_, resp, err := turn(t, p, ask)
			var spent *membudget.ExhaustedError
			if got := errors.As(err, &spent); got != tt.spent {
				t.Fatalf("got %v, want the budget spent: %v", err, tt.spent)
			}
			if err == nil && len(resp.Message.Content) != size {
				t.Errorf("got %d bytes of content, want %d", len(resp.Message.Content), size)
			}
			if n := budget.InUse(); n != 0 {
				t.Errorf("%d bytes still reserved after the reply", n)
			}
		})
	}
}
