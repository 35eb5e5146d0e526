package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Share is a part of what exprd holds with the turns at the gate, less
// what it held before them, over N: KiB of heap in use, or goroutines.
type Share struct {
	Where   string  `json:"where"`
	PerTurn float64 `json:"per_turn"`
	Percent float64 `json:"percent"`
}

// heapSnapshot is a heap profile's bytes in use, by the place they were
// allocated from (where) and by the function that allocated them (site);
// and the runtime's MemStats the profile ends with (HeapInuse,
// StackInuse, ...).
type heapSnapshot struct {
	where, site map[string]float64
	memStats    map[string]float64
}

// readHeap fetches exprd's heap profile after a GC (gc=1: a profile is as
// of the last GC) in its text form (debug=1) and
// adds up the bytes in use, each record scaled for the sampling as
// runtime/pprof scales the proto form; with dir set it keeps the proto
// form there too, for go tool pprof.
func readHeap(pprofAddr, dir, name string) (*heapSnapshot, error) {
	if dir != "" {
		if err := fetch("http://"+pprofAddr+"/debug/pprof/heap?gc=1", filepath.Join(dir, name+".pb.gz")); err != nil {
			return nil, err
		}
	}
	res, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return parseHeap(res.Body)
}

func fetch(url, path string) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// parseHeap reads the text form: a header "heap profile: ... @ heap/2RATE",
// then records "INUSE_OBJECTS: INUSE_BYTES [ALLOC_OBJECTS: ALLOC_BYTES] @
// ADDRS" each followed by its frames "#\tADDR\tFUNC+OFF\tFILE:LINE", leaf
// first; then the runtime's MemStats, as comments "# Name = value".
func parseHeap(r io.Reader) (*heapSnapshot, error) {
	s := &heapSnapshot{where: map[string]float64{}, site: map[string]float64{}, memStats: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	rate := 0.0
	stats := false // in the MemStats
	var bytes float64
	var frames []string
	flush := func() {
		if bytes > 0 {
			where, site := classify(frames)
			s.where[where] += bytes
			s.site[site] += bytes
		}
		bytes, frames = 0, frames[:0]
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "heap profile:"):
			_, r, ok := strings.Cut(line, "@ heap/")
			v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("heap profile header %q", line)
			}
			// The header says twice the sampling rate, as the legacy
			// format always has (runtime/pprof writes 2*MemProfileRate).
			rate = v / 2
		case strings.HasPrefix(line, "# runtime.MemStats"):
			flush()
			stats = true
		case stats:
			// "# HeapInuse = N", or "# Stack = INUSE / SYS" (and MSpan,
			// MCache, ...): the first number is what is in use.
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
			v, _, _ = strings.Cut(v, " / ")
			if f, err := strconv.ParseFloat(v, 64); ok && err == nil {
				s.memStats[k] = f
			}
		case strings.HasPrefix(line, "#\t"):
			if f := strings.Split(line, "\t"); len(f) >= 3 {
				fn, _, _ := strings.Cut(f[2], "+0x")
				frames = append(frames, fn)
			}
		case strings.Contains(line, " @ "):
			flush()
			var objs, inuse int64
			if _, err := fmt.Sscanf(line, "%d: %d [", &objs, &inuse); err != nil {
				return nil, fmt.Errorf("heap record %q: %v", line, err)
			}
			bytes = scaled(objs, inuse, rate)
		}
	}
	flush()
	if rate == 0 {
		return nil, fmt.Errorf("not a heap profile")
	}
	return s, sc.Err()
}

// scaled undoes the sampling of a record of objs objects holding bytes:
// an allocation of size s is sampled with probability 1-exp(-s/rate).
func scaled(objs, bytes int64, rate float64) float64 {
	if objs == 0 || bytes == 0 {
		return 0
	}
	if rate <= 1 {
		return float64(bytes)
	}
	avg := float64(bytes) / float64(objs)
	return float64(bytes) / (1 - math.Exp(-avg/rate))
}

// generic are packages whose allocations are charged to their caller:
// the runtime, buffers, encoding, protobuf's internals.
var generic = []string{"runtime", "bufio", "bytes", "strings", "sync", "reflect", "slices", "maps", "strconv", "fmt", "errors", "io",
	"sort", "context", "encoding/", "math", "unicode", "internal/", "google.golang.org/protobuf/", "log/slog", "time", "container/"}

// classify names where a record's bytes go: the first frame, from the
// leaf, in a package that is not generic, by what it is; and that frame's
// function (the site).
func classify(frames []string) (where, site string) {
	for _, fn := range frames {
		pkg := funcPackage(fn)
		if slices.ContainsFunc(generic, func(g string) bool {
			return pkg == g || strings.HasSuffix(g, "/") && strings.HasPrefix(pkg, g)
		}) {
			continue
		}
		return area(pkg), fn
	}
	if len(frames) > 0 {
		return "runtime and the standard library's generic code", frames[0]
	}
	return "unknown", "unknown"
}

// funcPackage is the package path of a function's full name:
// "net/http.(*Transport).dialConn" is "net/http".
func funcPackage(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}

// area groups a package into what the report names.
func area(pkg string) string {
	switch {
	case strings.HasPrefix(pkg, "google.golang.org/grpc"):
		return "gRPC (grpc-go: the client's stream, transport, buffers)"
	case pkg == "golang.org/x/net/http2" || strings.HasPrefix(pkg, "golang.org/x/net/http2/"):
		return "HTTP/2 framing (x/net/http2, under gRPC)"
	case pkg == "net/http":
		return "the model's HTTP connection (net/http client)"
	case pkg == "net" || pkg == "os" || pkg == "syscall":
		return "sockets (net, os)"
	case strings.HasPrefix(pkg, "go.opentelemetry.io/"):
		return "OpenTelemetry"
	case strings.HasPrefix(pkg, "github.com/exprd/exprd/"):
		return "exprd " + strings.TrimPrefix(pkg, "github.com/exprd/exprd/")
	}
	return pkg
}

// shares are what grew from before to at, in units per turn, largest
// first; past the top ones, and under 1% of the growth, parts are summed
// into one.
func shares(before, at map[string]float64, n, top int, unit float64) []Share {
	total := 0.0
	grew := map[string]float64{}
	for k, v := range at {
		if d := v - before[k]; d > 0 {
			grew[k] = d
			total += d
		}
	}
	keys := slices.Collect(func(yield func(string) bool) {
		for k := range grew {
			if !yield(k) {
				return
			}
		}
	})
	slices.SortFunc(keys, func(a, b string) int {
		if grew[a] != grew[b] {
			if grew[a] > grew[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var out []Share
	rest := 0.0
	for i, k := range keys {
		if i >= top || grew[k] < total/100 {
			rest += grew[k]
			continue
		}
		out = append(out, Share{Where: k, PerTurn: round(grew[k]/unit/float64(n), 2), Percent: round(100*grew[k]/total, 1)})
	}
	if rest > 0 {
		out = append(out, Share{Where: "the rest", PerTurn: round(rest/unit/float64(n), 2), Percent: round(100*rest/total, 1)})
	}
	return out
}

// readGoroutines counts exprd's goroutines by the function each started
// in (the last frame of its stack in /debug/pprof/goroutine?debug=1).
func readGoroutines(pprofAddr string) (map[string]float64, error) {
	res, err := http.Get("http://" + pprofAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return parseGoroutines(res.Body)
}

// parseGoroutines reads records "COUNT @ ADDRS" each followed by its
// frames "#\tADDR\tFUNC+OFF\tFILE:LINE", leaf first.
func parseGoroutines(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	count, root := 0, ""
	flush := func() {
		if count > 0 {
			out[root] += float64(count)
		}
		count, root = 0, ""
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#\t"):
			if f := strings.Split(line, "\t"); len(f) >= 3 {
				root, _, _ = strings.Cut(f[2], "+0x")
			}
		case strings.Contains(line, " @ "):
			flush()
			if _, err := fmt.Sscanf(line, "%d @", &count); err != nil {
				return nil, fmt.Errorf("goroutine record %q: %v", line, err)
			}
		}
	}
	flush()
	return out, sc.Err()
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}
