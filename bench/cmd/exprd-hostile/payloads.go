package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Case 6's call: silentSteps steps (exprd's --max-steps default), each
// writing a string of silentValue characters (under --max-string-length,
// 100,000), so each call streams silentSteps StepWrites of ~100 KB.
const (
	silentSteps = 50
	silentValue = 99_000
	// allocExpr makes 10,000 strings of 10,000 characters.
	allocExpr = `len(map(1..10000, repeat("x", 10000)))`
)

func buildEnv(addr string, cfg *config) *env {
	e := &env{addr: addr, cfg: cfg}
	e.hostileState = hostileState(cfg.hostileStateBytes)
	e.legalState, e.legalItems = legalState(cfg.legalStateBytes)
	e.deepAddress = "scopes.root" + strings.Repeat(".a", cfg.deepSegments)
	e.deepCall = `{"steps": [{"set": "` + e.deepAddress + `", "expr": "1"}]}`
	e.allocCall = `{"steps": [{"set": "scopes.root.n", "expr": "` + strings.ReplaceAll(allocExpr, `"`, `\"`) + `"}]}`
	e.searchQuery = searchQuery(cfg.searchBytes)
	step := `{"set": "scopes.root.w", "expr": "repeat(\"x\", ` + strconv.Itoa(silentValue) + `)"}`
	e.silentCall = `{"steps": [` + strings.Repeat(step+", ", silentSteps-1) + step + `]}`
	e.gzipBody, e.gzipInflated = gzipCall(cfg.gzipInflated)
	e.legitState, e.legitItems = legalState(cfg.legitStateBytes)
	e.megabyteJSON = stringsJSON(10_000, 100)
	e.foreverJSON = stringsJSON(foreverBytes/103, 100)
	return e
}

// hostileState is {"a":[{},{},…]} of about size bytes: one container per
// three bytes, far past the 262,144 exprd allows, and under its 16 MiB of
// state bytes, so that the containers bound is the one that answers.
func hostileState(size int) string {
	n := max((size-8)/3, 1)
	var b strings.Builder
	b.Grow(size)
	b.WriteString(`{"a":[`)
	b.WriteString(strings.Repeat("{},", n-1))
	b.WriteString(`{}]}`)
	return b.String()
}

// legalState is {"items": [...]} of about size bytes of product-like
// objects: one container per ~150 bytes, well within every bound.
func legalState(size int) (string, int) {
	var b strings.Builder
	b.Grow(size + 256)
	b.WriteString(`{"items":[`)
	n := 0
	for ; b.Len() < size-200; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"i%07d","name":"item %d","category":"%s","price":%d.%02d,"stock":%d,"discontinued":%t,"note":"an ordinary product, nothing to see"}`,
			n, n, [...]string{"home", "tech", "garden"}[n%3], 1+n%97, n%100, n%50, n%7 == 0)
	}
	b.WriteString(`]}`)
	return b.String(), n
}

// searchQuery is size bytes of distinct words: past 4,096 bytes and 32
// terms many times over.
func searchQuery(size int) string {
	var b strings.Builder
	b.Grow(size + 16)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String()[:size]
}

// stringsJSON is a JSON array of n strings of size characters each.
func stringsJSON(n, size int) string {
	item := `"` + strings.Repeat("y", size) + `"`
	return "[" + strings.Repeat(item+",", n-1) + item + "]"
}
