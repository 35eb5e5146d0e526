package main

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	out := `goos: linux
pkg: github.com/exprd/exprd/evaluator
BenchmarkOneStep/exprd-2   	  155778	      7712 ns/op	    3067 B/op	      54 allocs/op
BenchmarkOneStep/exprd-2   	  155778	      7000 ns/op	    3067 B/op	      54 allocs/op
BenchmarkOneStep/exprd-2   	  155778	      9000 ns/op	    3067 B/op	      54 allocs/op
pkg: github.com/exprd/exprd/server
BenchmarkSessionThroughput/streams=64-2        	  109953	     27770 ns/op	     36012 calls/s	    7605 B/op	     137 allocs/op
BenchmarkBroken-2   FAIL
PASS
`
	r := results{}
	if err := r.parse(strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, unit string
		want      stat
		ok        bool
	}{
		{"evaluator:OneStep/exprd", "ns/op", stat{Median: 7712, Min: 7000, Max: 9000, N: 3}, true},
		{"evaluator:OneStep/exprd", "allocs/op", stat{Median: 54, Min: 54, Max: 54, N: 3}, true},
		{"server:SessionThroughput/streams=64", "calls/s", stat{Median: 36012, Min: 36012, Max: 36012, N: 1}, true},
		{"server:Broken", "ns/op", stat{}, false},
		{"evaluator:OneStep/bare", "ns/op", stat{}, false},
	}
	for _, tc := range tests {
		got, ok := r.stat(tc.key, tc.unit)
		if got != tc.want || ok != tc.ok {
			t.Errorf("stat(%q, %q) = %+v, %v; want %+v, %v", tc.key, tc.unit, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSummariseEven(t *testing.T) {
	got, _ := summarise([]float64{4, 1, 3, 2})
	if got.Median != 2.5 || got.Min != 1 || got.Max != 4 {
		t.Fatalf("got %+v", got)
	}
}
