package utcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// LoadDir registers every manual in dir (files ending .json, .yaml or .yml,
// in name order, hidden files skipped). A file holding a call template (an
// object with call_template_type) registers through it, named by its `name`
// or else the file's base name; any other file is a manual or OpenAPI
// document named after the file. The first failure deregisters what this
// call registered and returns the error, naming the file. The manuals are
// the operator's (WithOperator): an mcp template of theirs may start a
// stdio server.
func (r *Registry) LoadDir(ctx context.Context, dir string) ([]*Registration, error) {
	ctx = WithOperator(ctx)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("utcp: LoadDir: %w", err)
	}
	var done []*Registration
	undo := func() {
		for _, reg := range done {
			_ = r.Deregister(reg.Manual)
		}
	}
	for _, de := range ents {
		fn := de.Name()
		ext := strings.ToLower(filepath.Ext(fn))
		if strings.HasPrefix(fn, ".") || de.IsDir() || (ext != ".json" && ext != ".yaml" && ext != ".yml") {
			continue
		}
		path := filepath.Join(dir, fn)
		src := FromFile(path)
		name := strings.TrimSuffix(fn, filepath.Ext(fn))
		if data, err := readFileCapped(path, r.cfg.maxResponse); err == nil {
			if v, err := DecodeDocument(data, "", path); err == nil {
				if obj, ok := v.(map[string]any); ok && (obj["call_template_type"] != nil || obj["provider_type"] != nil) {
					raw, _ := json.Marshal(obj)
					src = FromTemplate(raw)
					if n, ok := obj["name"].(string); ok && n != "" {
						name = n
					}
				}
			}
		}
		reg, err := r.Register(ctx, name, src)
		if err != nil {
			undo()
			return nil, fmt.Errorf("utcp: LoadDir: %s: %w", fn, err)
		}
		done = append(done, reg)
	}
	return done, nil
}

// similarNames returns up to MaxSimilarNames names close to name: the same
// tool in another manual first (`add` → `math.add`), then by edit distance.
func similarNames(name string, names []string) []string {
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	lname := strings.ToLower(name)
	_, short, hasDot := strings.Cut(lname, ".")
	if !hasDot {
		short = lname
	}
	most := max(2, len(lname)/3)
	runes := utf8.RuneCountInString(lname)
	for _, n := range names {
		ln := strings.ToLower(n)
		_, nshort, _ := strings.Cut(ln, ".")
		var d int
		switch {
		case nshort == short:
			d = 0
		case strings.Contains(ln, lname) && len(lname) >= 3:
			d = 1 // not 0: equal names have equal short names
		default:
			// The distance is at least the difference of the lengths:
			// a name far longer or shorter than any is never compared
			// (a long one would cost its length times each name's).
			if diff := utf8.RuneCountInString(ln) - runes; diff > most || -diff > most {
				continue
			}
			d = levenshtein(lname, ln)
		}
		if d <= most {
			cands = append(cands, cand{n, d})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, c := range cands {
		if len(out) == MaxSimilarNames {
			break
		}
		out = append(out, c.name)
	}
	return out
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
