package utcp

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/exprd/exprd/internal/schemafast"
)

func TestStem(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{"order", "orders", "ordered", "ordering"},
		{"create", "created", "creating", "creates"},
		{"category", "categories"},
		{"search", "searches", "searching"},
		{"ship", "shipped", "shipping"},
		{"delete", "deleted", "deletes"},
	}
	for _, g := range groups {
		want := stem(g[0])
		for _, w := range g[1:] {
			if got := stem(w); got != want {
				t.Errorf("stem(%q): got %q, want %q (as stem(%q))", w, got, want, g[0])
			}
		}
	}
	for _, w := range []string{"status", "address", "analysis", "bus"} {
		if got := stem(w); got != w {
			t.Errorf("stem(%q): got %q, want it unchanged", w, got)
		}
	}
}

func TestSplitWords(t *testing.T) {
	t.Parallel()
	got := strings.Join(splitWords("getUserHTTPServer_v2.list-items customer's"), " ")
	if want := "get User HTTP Server v2 list items customer s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestJSStringAndEncoding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    any
		want string
	}{
		{1.0, "1"}, {2.5, "2.5"}, {1e21, "1e+21"}, {0.0000001, "1e-7"}, {-0.5, "-0.5"},
		{true, "true"}, {nil, "null"}, {[]any{1.0, "a", nil}, "1,a,"}, {map[string]any{"k": 1.0}, `{"k":1}`},
	}
	for _, tc := range cases {
		if got := jsString(tc.v); got != tc.want {
			t.Errorf("jsString(%#v): got %q, want %q", tc.v, got, tc.want)
		}
	}
	if got, want := encodeURIComponent("u 42/x?&=é!*'()~"), "u%2042%2Fx%3F%26%3D%C3%A9!*'()~"; got != want {
		t.Errorf("encodeURIComponent: got %q, want %q", got, want)
	}
	if got, want := axiosEncode("a b:$,[]&é"), "a+b:$,[]%26%C3%A9"; got != want {
		t.Errorf("axiosEncode: got %q, want %q", got, want)
	}
}

func TestReadLineLimit(t *testing.T) {
	t.Parallel()
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 20)+"\nok\n"), 16)
	if _, err := readLine(br, 10); err != errLineTooLong {
		t.Errorf("a 20-byte line with limit 10: got %v, want errLineTooLong", err)
	}
	br = bufio.NewReaderSize(strings.NewReader("0123456789\nlast"), 16)
	if l, err := readLine(br, 11); err != nil || string(l) != "0123456789" {
		t.Errorf("a line at the limit: got %q %v", l, err)
	}
	if l, err := readLine(br, 11); err != io.EOF || string(l) != "last" {
		t.Errorf("last line without an ending: got %q %v, want last and io.EOF", l, err)
	}
}

// TestSimpleSchemaNeverAcceptsWhatTheValidatorRefuses checks the fast path
// against the validator for every type and a spread of values.
func TestSimpleSchemaNeverAcceptsWhatTheValidatorRefuses(t *testing.T) {
	t.Parallel()
	values := []any{nil, true, false, "s", "", 1.0, 1.5, math.Copysign(0, -1), 1e300, int(2), int64(-3), uint8(4), float32(2.5),
		json.Number("3"), json.Number("3.0"), json.Number("1e2"), json.Number("99999999999999999999"),
		map[string]any{}, map[string]any{"a": 1.0}, []any{}, []any{1.0}, math.NaN(), math.Inf(1)}
	for _, typ := range append([]string{""}, schemafast.Types...) {
		for _, closed := range []bool{false, true} {
			prop := map[string]any{"description": "p"}
			if typ != "" {
				prop["type"] = typ
			}
			doc := map[string]any{"type": "object", "properties": map[string]any{"p": prop}, "required": []any{"p"}, "additionalProperties": !closed}
			fast := schemafast.New(doc)
			if fast == nil {
				t.Fatalf("type %q: no fast path for a simple schema", typ)
			}
			sch, err := compileSchema(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range values {
				for _, args := range []map[string]any{{"p": v}, {"p": v, "extra": 1.0}, {}} {
					if isJSONValue(args) && fast.Accepts(args) && sch.Validate(map[string]any(args)) != nil {
						t.Errorf("type %q closed=%v args %#v: fast path accepts, validator refuses", typ, closed, args)
					}
				}
			}
		}
	}
	for _, doc := range []any{
		map[string]any{"type": "object", "properties": map[string]any{"p": map[string]any{"type": "string", "minLength": 2.0}}},
		map[string]any{"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"},
		map[string]any{"type": "array"},
		map[string]any{"type": "object", "properties": map[string]any{"p": map[string]any{"type": []any{"string", "null"}}}},
	} {
		if schemafast.New(doc) != nil {
			t.Errorf("%v: got a fast path, want none", doc)
		}
	}
}
