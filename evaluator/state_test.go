package evaluator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// rfc7386Examples are the test cases of RFC 7386, Appendix A.
var rfc7386Examples = []struct{ target, patch, want string }{
	{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
	{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
	{`{"a":"b"}`, `{"a":null}`, `{}`},
	{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
	{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
	{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
	{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
	{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
	{`["a","b"]`, `["c","d"]`, `["c","d"]`},
	{`{"a":"b"}`, `["c"]`, `["c"]`},
	{`{"a":"foo"}`, `null`, `null`},
	{`{"a":"foo"}`, `"bar"`, `"bar"`},
	{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
	{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
	{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
}

func TestMergePatchRFC7386(t *testing.T) {
	t.Parallel()
	for _, ex := range rfc7386Examples {
		// The state is an object and so is a patch of it: every example
		// runs one level down, under "x", and the object ones also at the
		// top.
		t.Run("under x: "+ex.target+" + "+ex.patch, func(t *testing.T) {
			t.Parallel()
			st := newState(t, `{"x":`+ex.target+`,"keep":true}`)
			if err := st.MergePatch([]byte(`{"x":` + ex.patch + `}`)); err != nil {
				t.Fatalf("MergePatch: %v", err)
			}
			want := `{"x":` + ex.want + `,"keep":true}`
			if ex.patch == "null" {
				want = `{"keep":true}`
			}
			assertState(t, st, want)
		})
		if ex.target[0] != '{' || ex.patch[0] != '{' {
			continue
		}
		t.Run(ex.target+" + "+ex.patch, func(t *testing.T) {
			t.Parallel()
			st := newState(t, ex.target)
			if err := st.MergePatch([]byte(ex.patch)); err != nil {
				t.Fatalf("MergePatch: %v", err)
			}
			assertState(t, st, ex.want)
		})
	}
}

func TestMergePatchRefusesWhatIsNotAnObject(t *testing.T) {
	t.Parallel()
	for _, patch := range []string{`["c"]`, `null`, `"bar"`, `1`, `{"a":`, ``} {
		st := newState(t, `{"a":"b"}`)
		if err := st.MergePatch([]byte(patch)); err == nil {
			t.Errorf("MergePatch(%q): got no error, want one", patch)
		}
		assertState(t, st, `{"a":"b"}`)
	}
}

func TestReplace(t *testing.T) {
	t.Parallel()
	st := evaluator.NewState()
	assertState(t, st, `{}`)
	if err := st.Replace([]byte(`{"a":[1,{"b":null}]}`)); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	assertState(t, st, `{"a":[1,{"b":null}]}`)
	for _, bad := range []string{`[]`, `null`, `"x"`, `{"a":`, `{} {}`, ``} {
		if err := st.Replace([]byte(bad)); err == nil {
			t.Errorf("Replace(%q): got no error, want one", bad)
		}
		assertState(t, st, `{"a":[1,{"b":null}]}`)
	}
}

// TestSnapshotNeverChanges takes a snapshot, then changes the state every
// way there is, and checks that the snapshot still reads the same.
func TestSnapshotNeverChanges(t *testing.T) {
	t.Parallel()
	const start = `{"a":{"b":{"c":1},"list":[1,{"d":2}]},"keep":{"k":true},"s":"x"}`
	changes := []struct {
		name  string
		apply func(*evaluator.State) error
	}{
		{"merge patch of a nested key", func(st *evaluator.State) error {
			return st.MergePatch([]byte(`{"a":{"b":{"c":2,"new":true}}}`))
		}},
		{"merge patch deleting a key", func(st *evaluator.State) error { return st.MergePatch([]byte(`{"a":{"b":null}}`)) }},
		{"merge patch of an array", func(st *evaluator.State) error { return st.MergePatch([]byte(`{"a":{"list":[]}}`)) }},
		{"replace", func(st *evaluator.State) error { return st.Replace([]byte(`{"a":0}`)) }},
		{"write of a nested key", write(`scopes.root.a.b.c`, `3`)},
		{"write of a new key", write(`scopes.root.a.b.z`, `3`)},
		{"write of an array item", write(`scopes.root.a.list[0]`, `9`)},
		{"write in an array item", write(`scopes.root.a.list[1].d`, `9`)},
		{"append to an array", write(`scopes.root.a.list[2]`, `9`)},
		{"write of a whole subtree", write(`scopes.root.a`, `{}`)},
	}
	for _, ch := range changes {
		t.Run(ch.name, func(t *testing.T) {
			t.Parallel()
			st := newState(t, start)
			snap := st.Snapshot()
			before := mustMarshal(t, snap)
			if err := ch.apply(st); err != nil {
				t.Fatal(err)
			}
			if after := mustMarshal(t, snap); after != before {
				t.Errorf("snapshot: got %s after the change, want %s as before", after, before)
			}
			if now := mustMarshal(t, st.Snapshot()); now == before {
				t.Errorf("state: got %s, want it changed", now)
			}
		})
	}
}

// write returns a change that runs a call setting path to the JSON value.
func write(path, value string) func(*evaluator.State) error {
	return func(st *evaluator.State) error {
		e, err := evaluator.New()
		if err != nil {
			return err
		}
		tool, err := evaluator.NewTool(evaluator.Settings{}, evaluator.DefaultBudgets())
		if err != nil {
			return err
		}
		input, _ := json.Marshal(map[string]any{"steps": []any{map[string]any{"set": path, "expr": "fromJSON(" + strconv.Quote(value) + ")"}}})
		if a := e.Run(context.Background(), tool, st, input, evaltest.NewHost(nil)); a.Err != nil {
			return a.Err
		}
		return nil
	}
}

func newState(t *testing.T, data string) *evaluator.State {
	t.Helper()
	st := evaluator.NewState()
	if err := st.Replace([]byte(data)); err != nil {
		t.Fatalf("Replace(%s): %v", data, err)
	}
	return st
}

func assertState(t *testing.T, st *evaluator.State, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	got := any(st.Snapshot())
	if !reflect.DeepEqual(roundTrip(t, got), w) {
		t.Errorf("state: got %s, want %s", mustMarshal(t, got), want)
	}
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(mustMarshal(t, v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// boxes is a state holding n objects and arrays in all: the root, an
// array, and n-2 empty objects in it.
func boxes(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range n - 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("{}")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func nested(depth int) []byte {
	return []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + "}")
}

// A state is bounded by its objects and arrays and by its depth, not only
// by its bytes: 15 MB of {} would take half a gigabyte. Each bound holds at
// the limit and one past it, for Replace and MergePatch; a refused change
// leaves the state as it was.
func TestStateBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		doc  []byte
		want string // StateTooLargeError.What, "" for accepted
	}{
		{"containers at the limit", boxes(evaluator.MaxStateContainers), ""},
		{"containers one past the limit", boxes(evaluator.MaxStateContainers + 1), "containers"},
		{"depth at the limit", nested(evaluator.MaxStateDepth), ""},
		{"depth one past the limit", nested(evaluator.MaxStateDepth + 1), "depth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, op := range []string{"Replace", "MergePatch"} {
				s := evaluator.NewState()
				if err := s.Replace([]byte(`{"keep":1}`)); err != nil {
					t.Fatal(err)
				}
				var err error
				if op == "Replace" {
					err = s.Replace(tc.doc)
				} else {
					err = s.MergePatch(tc.doc)
				}
				var big *evaluator.StateTooLargeError
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("%s: got %v, want it accepted", op, err)
				case tc.want != "" && (!errors.As(err, &big) || big.What != tc.want):
					t.Errorf("%s: got %v, want a StateTooLargeError on %s", op, err, tc.want)
				case tc.want != "":
					if _, ok := s.Snapshot()["keep"]; !ok {
						t.Errorf("%s: a refused change changed the state", op)
					}
				}
			}
		})
	}
	// Patches add up: two halves are accepted, a third is one too many.
	s := evaluator.NewState()
	half := evaluator.MaxStateContainers/2 - 2
	for i, want := range []bool{true, true, false} {
		err := s.MergePatch([]byte(fmt.Sprintf(`{"p%d":%s}`, i, boxes(half)[5:len(boxes(half))-1])))
		if (err == nil) != want {
			t.Errorf("patch %d: got %v, want accepted %v", i, err, want)
		}
	}
}

// The bytes are checked before anything is decoded: a document over the
// limit is refused for its size, whatever it holds.
func TestStateBytesCheckedBeforeDecoding(t *testing.T) {
	t.Parallel()
	s := evaluator.NewState(10)
	var big *evaluator.StateTooLargeError
	if err := s.Replace([]byte(`{"not json at all`)); !errors.As(err, &big) {
		t.Errorf("Replace: got %v, want StateTooLargeError", err)
	}
	if err := s.MergePatch([]byte(`{"not json at all`)); !errors.As(err, &big) {
		t.Errorf("MergePatch: got %v, want StateTooLargeError", err)
	}
}

// Writes count toward the bound on objects and arrays too: on a state one
// short of it (the root, an array and MaxStateContainers-2 objects), a
// write of one more object is accepted, and then one more is refused as
// budget-exceeded, leaving the state as it was.
func TestStateBoundsOnWrites(t *testing.T) {
	t.Parallel()
	st := evaluator.NewState()
	if err := st.Replace(boxes(evaluator.MaxStateContainers - 1)); err != nil {
		t.Fatal(err)
	}
	if err := write("scopes.root.last", `{}`)(st); err != nil {
		t.Fatalf("a write to the limit: %v", err)
	}
	err := write("scopes.root.past", `{}`)(st)
	var e *evaluator.Error
	if !errors.As(err, &e) || e.Reason != evaluator.BudgetExceeded {
		t.Fatalf("a write one past the limit: got %v, want budget-exceeded", err)
	}
	if _, ok := st.Snapshot()["past"]; ok {
		t.Errorf("a refused write changed the state")
	}
}
