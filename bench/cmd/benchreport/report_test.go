package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleResults is a run with every scale benchmark and one pair.
func sampleResults(t *testing.T) results {
	t.Helper()
	var out strings.Builder
	out.WriteString("pkg: github.com/exprd/exprd/bench\n")
	for _, size := range stateSizesNames {
		for i, kind := range []string{"snapshot", "point", "scan"} {
			out.WriteString("BenchmarkStateSize/" + size + "/" + kind + "-2 10 " + []string{"1000", "2000", "3000"}[i] + " ns/op\n")
		}
	}
	for _, n := range []string{"1", "4", "16", "50"} {
		out.WriteString("BenchmarkSteps/steps=" + n + "-2 10 " + n + "000 ns/op\n")
	}
	out.WriteString("BenchmarkEngines/small/exprd-2 10 1200 ns/op 5 allocs/op\nBenchmarkEngines/small/expr-2 10 1000 ns/op 4 allocs/op\n")
	r := results{}
	if err := r.parse(strings.NewReader(out.String())); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMarkdown(t *testing.T) {
	rep := report{results: sampleResults(t), options: options{count: 1, benchtime: "1x"}}
	md := rep.markdown()
	for _, want := range []string{
		"| one-step call (the ids of the 5 cheapest of 20 products)", "**1.20×** | ≤ 1.3× — met |",
		"| 10,000-item `filter`/`map` step through `evaluator/` vs a bare `expr.Run` | missing | missing | — | ≤ 1.1× |",
		"| 10MB | 1 µs (1 µs–1 µs) | 2 µs (2 µs–2 µs) | 3 µs (3 µs–3 µs) |",
		"| 50 | 50 µs (50 µs–50 µs) | 1 µs |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"intro\n" + beginMarker + "\nold\n" + endMarker + "\nnotes\n", "intro\n" + beginMarker + "\nnew\n" + endMarker + "\nnotes\n", true},
		{"no markers\n", "no markers\n", false},
		{endMarker + "\n" + beginMarker + "\n", endMarker + "\n" + beginMarker + "\n", false},
	}
	for _, tc := range tests {
		if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
			t.Fatal(err)
		}
		err := rewrite(path, "new\n")
		if (err == nil) != tc.ok {
			t.Errorf("rewrite(%q) error %v, want ok %v", tc.in, err, tc.ok)
		}
		got, _ := os.ReadFile(path)
		if string(got) != tc.want {
			t.Errorf("rewrite(%q) wrote %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scale.png")
	if err := (report{results: sampleResults(t)}).plot(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Fatalf("the plot is %v", b)
	}
}
