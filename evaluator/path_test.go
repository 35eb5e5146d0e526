package evaluator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/evaluator"
)

func TestParsePath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path string
		// wantAt, when set, is the part of the address an error must point
		// at; "" for an address that parses.
		wantErr bool
		wantAt  string
	}{
		{name: "key", path: "scopes.root.selected"},
		{name: "nested keys", path: "scopes.root.a.b.c"},
		{name: "index then key", path: "scopes.root.items[3].name"},
		{name: "index zero", path: "scopes.root.items[0]"},
		{name: "indexes in a row", path: "scopes.root.grid[1][2]"},
		{name: "quoted key", path: `scopes.root["odd key"]`},
		{name: "quoted key holding a bracket", path: `scopes.root["a]b"].c`},
		{name: "quoted key with escapes", path: `scopes.root["tab\there \"q\""]`},
		{name: "empty quoted key", path: `scopes.root[""]`},
		{name: "index on root parses", path: "scopes.root[0]"},
		{name: "underscore and digits", path: "scopes.root._a1.b_2"},
		{name: "dollar in a name", path: "scopes.root.$ref"},
		{name: "the largest index", path: "scopes.root.a[100000]"},
		{name: "segments at the limit", path: "scopes.root" + strings.Repeat(".a", evaluator.MaxPathSegments)},
		{name: "length at the limit", path: "scopes.root." + strings.Repeat("a", evaluator.MaxPathLength-len("scopes.root."))},
		{name: "segments one past the limit", path: "scopes.root" + strings.Repeat(".a", evaluator.MaxPathSegments+1), wantErr: true},
		{name: "length one past the limit", path: "scopes.root." + strings.Repeat("a", evaluator.MaxPathLength-len("scopes.root.")+1), wantErr: true},
		{name: "the 40 KB address", path: "scopes.root" + strings.Repeat(".a", 20000), wantErr: true},

		{name: "empty", path: "", wantErr: true},
		{name: "scopes alone", path: "scopes", wantErr: true},
		{name: "another scope", path: "scopes.evt.x", wantErr: true},
		{name: "no prefix", path: "selected", wantErr: true},
		{name: "capitalised prefix", path: "Scopes.root.a", wantErr: true},
		{name: "leading space", path: " scopes.root.a", wantErr: true},
		{name: "root itself", path: "scopes.root", wantErr: true},
		{name: "root with a trailing dot", path: "scopes.root.", wantErr: true, wantAt: "."},
		{name: "empty name", path: "scopes.root..a", wantErr: true, wantAt: "..a"},
		{name: "name starting with a digit", path: "scopes.root.1a", wantErr: true, wantAt: ".1a"},
		{name: "unclosed bracket", path: "scopes.root.items[", wantErr: true, wantAt: "["},
		{name: "unclosed index", path: "scopes.root.items[0", wantErr: true, wantAt: "[0"},
		{name: "empty brackets", path: "scopes.root.items[]", wantErr: true, wantAt: "[]"},
		{name: "negative index", path: "scopes.root.items[-1]", wantErr: true, wantAt: "[-1]"},
		{name: "leading zero", path: "scopes.root.items[01]", wantErr: true, wantAt: "[01]"},
		{name: "fraction", path: "scopes.root.items[1.5]", wantErr: true, wantAt: "[1.5]"},
		{name: "space in brackets", path: "scopes.root.items[ 1]", wantErr: true, wantAt: "[ 1]"},
		{name: "index past the array limit", path: "scopes.root.items[100001]", wantErr: true, wantAt: "[100001]"},
		{name: "index past int", path: "scopes.root.items[99999999999999999999]", wantErr: true},
		{name: "single-quoted key", path: "scopes.root['a']", wantErr: true, wantAt: "['a']"},
		{name: "unclosed quoted key", path: `scopes.root["a`, wantErr: true},
		{name: "quoted key without bracket", path: `scopes.root["a"`, wantErr: true},
		{name: "quoted key then junk", path: `scopes.root["a"x]`, wantErr: true},
		{name: "name then a space", path: "scopes.root.a b", wantErr: true, wantAt: " b"},
		{name: "root then a letter", path: "scopes.rootx", wantErr: true, wantAt: `"x"`},
		{name: "root then an underscore", path: "scopes.root_x", wantErr: true, wantAt: `"_x"`},
		{name: "name then a dash", path: "scopes.root.a-b", wantErr: true, wantAt: `"-b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := evaluator.ParsePath(tt.path)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("ParsePath(%q): got error %v, want none", tt.path, err)
				}
				if got := p.String(); got != tt.path {
					t.Errorf("ParsePath(%q).String(): got %q, want %q", tt.path, got, tt.path)
				}
				return
			}
			var e *evaluator.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParsePath(%q): got error %v (%T), want an *evaluator.Error", tt.path, err, err)
			}
			if e.Reason != evaluator.GuardrailViolation {
				t.Errorf("ParsePath(%q): got reason %q, want %q", tt.path, e.Reason, evaluator.GuardrailViolation)
			}
			if tt.wantAt != "" && !strings.Contains(e.Message, "at "+quoteIfBare(tt.wantAt)) {
				t.Errorf("ParsePath(%q): got message %q, want it to point at %s", tt.path, e.Message, quoteIfBare(tt.wantAt))
			}
		})
	}
}

// TestParsePathRefusesPrototypeKeys: the keys through which a JavaScript
// client mirroring writes along their path would reach a prototype are
// refused in every position and spelling; keys that only look like them
// parse.
func TestParsePathRefusesPrototypeKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path    string
		refused string // the key the error names; "" when the address parses
	}{
		{path: "scopes.root.__proto__", refused: "__proto__"},
		{path: "scopes.root.__proto__.polluted", refused: "__proto__"},
		{path: `scopes.root["__proto__"]`, refused: "__proto__"},
		{path: `scopes.root["\u005f_proto__"]`, refused: "__proto__"},
		{path: "scopes.root.a.constructor.prototype", refused: "constructor"},
		{path: `scopes.root.a["constructor"]`, refused: "constructor"},
		{path: "scopes.root.items[0].prototype", refused: "prototype"},
		{path: "scopes.root.__proto"},
		{path: "scopes.root.__proto___"},
		{path: "scopes.root.Constructor"},
		{path: "scopes.root.prototypes"},
		{path: `scopes.root[" __proto__"]`},
		{path: "scopes.root.proto"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			_, err := evaluator.ParsePath(tt.path)
			if tt.refused == "" {
				if err != nil {
					t.Fatalf("ParsePath(%q): got error %v, want none", tt.path, err)
				}
				return
			}
			var e *evaluator.Error
			if !errors.As(err, &e) || e.Reason != evaluator.GuardrailViolation {
				t.Fatalf("ParsePath(%q): got error %v, want a guardrail-violation", tt.path, err)
			}
			if want := `the key "` + tt.refused + `", which is refused`; !strings.Contains(e.Message, want) || !strings.Contains(e.Message, "prototype pollution") {
				t.Errorf("ParsePath(%q): got message %q, want it to contain %q and say why", tt.path, e.Message, want)
			}
		})
	}
}

// quoteIfBare quotes s as the error messages do, unless it already is.
func quoteIfBare(s string) string {
	if strings.HasPrefix(s, `"`) {
		return s
	}
	return `"` + s + `"`
}
