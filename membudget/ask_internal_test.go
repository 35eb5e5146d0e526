package membudget

import (
	"testing"
	"time"
)

// A waiting reservation asks again at most once every AskAgainEvery over
// the whole budget: at AskAgainEvery after the last ask again, and not a
// nanosecond before.
func TestAskAgainEvery(t *testing.T) {
	b := New(1<<20, time.Second)
	t0 := time.Unix(1_000_000, 0)
	for _, tt := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"the first", t0, true},
		{"at once after", t0, false},
		{"a nanosecond short of AskAgainEvery", t0.Add(AskAgainEvery - 1), false},
		{"at AskAgainEvery", t0.Add(AskAgainEvery), true},
		{"a nanosecond past the one before", t0.Add(AskAgainEvery + 1), false},
	} {
		if got := b.mayAskAgain(tt.at); got != tt.ok {
			t.Errorf("%s: asks again %v, want %v", tt.name, got, tt.ok)
		}
	}
}
