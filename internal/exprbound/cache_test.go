package exprbound_test

import (
	"testing"

	"github.com/exprd/exprd/internal/exprbound"
)

// A cache holds its size, and one more program evicts the least recently
// used; every lookup is counted.
func TestCacheBound(t *testing.T) {
	t.Parallel()
	if _, err := exprbound.NewCache[string, int](0); err == nil {
		t.Error("NewCache(0): got no error, want one")
	}
	c, err := exprbound.NewCache[string, int](2)
	if err != nil {
		t.Fatal(err)
	}
	c.Add("a", 1)
	c.Add("b", 2)
	c.Get("a") // b is now the least recently used
	c.Add("a", 10)
	c.Add("c", 3)
	for k, want := range map[string]int{"a": 1, "b": 0, "c": 3} {
		if got, _ := c.Get(k); got != want {
			t.Errorf("Get(%q): got %d, want %d", k, got, want)
		}
	}
	if got, want := c.Stats(), (exprbound.CacheStats{Hits: 3, Misses: 1, Len: 2}); got != want {
		t.Errorf("Stats: got %+v, want %+v", got, want)
	}
}
