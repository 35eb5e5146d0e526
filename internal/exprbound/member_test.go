package exprbound_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/expr-lang/expr"

	"github.com/exprd/exprd/internal/exprbound"
)

// memberDoc is the document the member-access programs read: objects,
// arrays, nulls and scalars at every depth.
const memberDoc = `{"a": {"b": {"c": 1}, "list": [{"b": 2}, null, 3, "s"], "n": null},
 "list": [{"a": {"b": 4}}, {"a": null}, {}], "s": "text", "x": 5, "t": true}`

// memberSegments are the accesses a fuzzed program chains onto its value;
// each byte of the input picks one.
var memberSegments = []string{
	".a", ".b", ".c", ".list", ".n", ".s", ".x", ".missing",
	"?.a", "?.b", "?.list", "?.missing",
	"[0]", "[1]", "[-1]", "[7]", `["a"]`, `["b"]`, `?.["b"]`,
}

// memberProgram turns the fuzzer's bytes into a program: a chain of
// accesses on v, or, when the first byte is odd, the rest of the chain
// inside a map over the first part.
func memberProgram(path []byte) string {
	var b strings.Builder
	b.WriteString("v")
	mapAt := -1
	if len(path) > 0 && path[0]%2 == 1 {
		mapAt = int(path[0]/2) % (len(path) + 1)
	}
	for i, c := range path {
		if i == mapAt {
			return "map(" + b.String() + ", #" + memberChain(path[i:]) + ")"
		}
		b.WriteString(memberSegments[int(c)%len(memberSegments)])
	}
	return b.String()
}

func memberChain(path []byte) string {
	var b strings.Builder
	for _, c := range path {
		b.WriteString(memberSegments[int(c)%len(memberSegments)])
	}
	return b.String()
}

// FuzzMemberAccess holds the sandbox's member access, which reads JSON
// objects directly, to expr's: every chain of accesses on a JSON document
// gives the same value, or the same error at the same place.
func FuzzMemberAccess(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0}, {0, 1, 2}, {0, 3, 12}, {0, 7, 2}, {0, 6, 7}, {9, 1}, {0, 8, 0, 1},
		{3, 3, 12, 0}, {5, 3, 0, 1}, {0, 13, 1}, {0, 16, 1}, {0, 17, 18}, {0, 4, 0}, {0, 5, 0}, {0, 14, 15},
		{0, 3, 14}, {0, 3, 15}, {0, 0, 3, 13, 1}, {0, 3, 12, 14},
	} {
		f.Add(seed)
	}
	var doc any
	if err := json.Unmarshal([]byte(memberDoc), &doc); err != nil {
		f.Fatal(err)
	}
	env := map[string]any{"v": doc, exprbound.TickName: func() bool { return true }}
	f.Fuzz(func(t *testing.T, path []byte) {
		if len(path) > 12 {
			return
		}
		src := memberProgram(path)
		bare, bareErr := expr.Compile(src, expr.Env(env))
		sandboxed, err := exprbound.Compile(src, env, exprbound.Limits{}, recorder(new([]string)))
		if (bareErr == nil) != (err == nil) {
			t.Fatalf("%s: compiles bare: %v; in the sandbox: %v", src, bareErr, err)
		}
		if err != nil {
			return
		}
		want, wantErr := expr.Run(bare, env)
		got, gotErr := expr.Run(sandboxed, env)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n in the sandbox %#v, %v\n bare           %#v, %v", src, got, gotErr, want, wantErr)
		}
	})
}
