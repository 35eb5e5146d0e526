package membudget_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/membudget"
)

// A reader reserves perByte for each byte read and about to be read, up
// to most and not past it; a read the budget cannot hold fails with its
// error and reads nothing; Close gives everything back.
func TestReadCloser(t *testing.T) {
	tests := []struct {
		name      string
		body      int
		most      int64
		budget    int64
		wantHeld  int64 // after reading it all, before Close
		wantSpent bool
	}{
		{"under most: twice what it read and what it asked for (io.ReadAll asks for 512)", 100, 1 << 20, 1 << 20, 2 * 512, false},
		{"at most", 1000, 2000, 1 << 20, 2000, false},
		{"past most: most", 5000, 2000, 1 << 20, 2000, false},
		{"past the budget", 5000, 1 << 20, 4000, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := membudget.New(tt.budget, time.Millisecond)
			res := budget.Empty("test")
			r := membudget.NewReadCloser(context.Background(), io.NopCloser(strings.NewReader(strings.Repeat("x", tt.body))), res, 2, tt.most)
			_, err := io.ReadAll(r)
			var spent *membudget.ExhaustedError
			if errors.As(err, &spent) != tt.wantSpent {
				t.Fatalf("read: %v, want the budget spent: %v", err, tt.wantSpent)
			}
			if !tt.wantSpent && res.Size() != tt.wantHeld {
				t.Errorf("held %d after reading %d bytes, want %d", res.Size(), tt.body, tt.wantHeld)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if n := budget.InUse(); n != 0 {
				t.Errorf("%d still reserved after Close", n)
			}
		})
	}
}
