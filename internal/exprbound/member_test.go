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
	".Name", ".Items",
}

// memberRoots are the values a program starts from: the document as an
// unknown type, a JSON array and object typed as such, a struct and a map
// of a named type.
var memberRoots = []string{"v", "arr", "obj", "st", "named"}

// memberStruct is a Go value among JSON ones: its fields are read through
// expr's own access.
type memberStruct struct {
	Name  string
	Items []any
}

type namedObject map[string]any

// memberProgram turns the fuzzer's bytes into a program: the first picks
// the root, the rest a chain of accesses on it, or, when the second is
// odd, the rest of the chain inside a map over its first part (a
// predicate), or a filter of it when the map's place is even.
func memberProgram(path []byte) string {
	if len(path) == 0 {
		return "v"
	}
	root, path := memberRoots[int(path[0])%len(memberRoots)], path[1:]
	var b strings.Builder
	b.WriteString(root)
	mapAt := -1
	if len(path) > 0 && path[0]%2 == 1 {
		mapAt = int(path[0]/2) % (len(path) + 1)
	}
	for i, c := range path {
		if i == mapAt {
			if i%2 == 0 {
				return "filter(" + b.String() + ", #" + memberChain(path[i:]) + " != nil)"
			}
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
		{1, 12, 0, 1}, {1, 14, 15}, {2, 0, 3, 12}, {3, 19}, {3, 20, 12, 0}, {4, 0, 1}, {0, 3, 3, 1}, {0, 4, 3, 1, 0}, {0, 5, 3, 12, 1},
	} {
		f.Add(seed)
	}
	var doc any
	if err := json.Unmarshal([]byte(memberDoc), &doc); err != nil {
		f.Fatal(err)
	}
	var arr []any
	var obj map[string]any
	if err := json.Unmarshal([]byte(`[{"a": {"b": 1}}, null, "s", [1, {"b": 2}]]`), &arr); err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal([]byte(memberDoc), &obj); err != nil {
		f.Fatal(err)
	}
	env := map[string]any{
		"v": doc, "arr": arr, "obj": obj, "named": namedObject(obj),
		"st":               memberStruct{Name: "n", Items: arr},
		exprbound.TickName: func() bool { return true },
		// The meter's functions, which the sandbox calls on what builds a
		// value (map, a literal): here they charge nothing.
		exprbound.AllocName: func(v any) any { return v }, exprbound.AllocDeepName: func(v any) any { return v },
		exprbound.MeterName: (*exprbound.Meter)(nil),
	}
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
