package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results holds every sample of every benchmark, keyed "pkg:Name/sub"
// where pkg is the package's last path element and Name drops the
// Benchmark prefix and the -GOMAXPROCS suffix: "evaluator:OneStep/exprd".
type results map[string][]sample

// A sample is one line of `go test -bench` output: its metrics by unit
// ("ns/op", "B/op", "allocs/op", "calls/s", ...).
type sample map[string]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads `go test -bench` output, adding its samples to r.
func (r results) parse(out io.Reader) error {
	pkg := ""
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndex(p, "/")+1:]
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := procSuffix.ReplaceAllString(strings.TrimPrefix(fields[0], "Benchmark"), "")
		s := sample{}
		// fields[1] is the iteration count; then value-unit pairs.
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				break
			}
			s[fields[i+1]] = v
		}
		if len(s) > 0 {
			r[pkg+":"+name] = append(r[pkg+":"+name], s)
		}
	}
	return sc.Err()
}

// A stat is the median and range of one metric over a benchmark's samples.
type stat struct {
	Median, Min, Max float64
	N                int
}

// stat summarises metric unit of benchmark key; ok is false when absent.
func (r results) stat(key, unit string) (stat, bool) {
	var vs []float64
	for _, s := range r[key] {
		if v, ok := s[unit]; ok {
			vs = append(vs, v)
		}
	}
	return summarise(vs)
}

func summarise(vs []float64) (stat, bool) {
	if len(vs) == 0 {
		return stat{}, false
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	m := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return stat{Median: m, Min: vs[0], Max: vs[len(vs)-1], N: len(vs)}, true
}
