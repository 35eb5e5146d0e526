package server

import "testing"

// A page takes tools while they fit its size and MaxPageBytes, at the
// limit and one past it; its first tool always fits, however large, so a
// tool larger than MaxPageBytes makes a page of one instead of no page.
func TestPageFits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		size  int
		tools []int // encoded sizes, in order
		want  int   // how many join the page
	}{
		{"up to its size", 3, []int{10, 10, 10, 10}, 3},
		{"bytes at the limit", 50, []int{MaxPageBytes - 10, 10, 1}, 2},
		{"one byte past the limit", 50, []int{MaxPageBytes - 10, 11}, 1},
		{"an oversized first tool makes a page of one", 50, []int{MaxPageBytes + 1, 1}, 1},
		{"an oversized later tool waits for the next page", 50, []int{1, MaxPageBytes}, 1},
		{"a page of size one", 1, []int{1, 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := page{size: tc.size}
			got := 0
			for _, b := range tc.tools {
				if !p.fits(b) {
					break
				}
				got++
			}
			if got != tc.want {
				t.Errorf("%d tools joined, want %d", got, tc.want)
			}
		})
	}
}
