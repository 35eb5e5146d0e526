package evaluator

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzStateChanges: the state and state_patch messages a client sends.
// Replace and MergePatch either change the state to what the JSON says
// (a merge patch as RFC 7386 defines it, computed here apart with
// encoding/json) or refuse and leave it as it was; the state's size
// estimate never falls below its real JSON size nor passes its limit.
func FuzzStateChanges(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"a":1,"b":{"c":[1,2]}}`, `{"b":{"c":null,"d":"x"},"e":true}`},
		{`{}`, `{"a":{"b":{"c":{}}}}`},
		{`{"a":"é\u0000"}`, `{"a":null}`},
		{`[]`, `"not an object"`},
		{`{"a":1}`, `{"a":1e400}`},
		{`{"a":1,"a":2}`, `{"__proto__":{"x":1}}`},
		{`{"a":[]}`, `{"a":[[[[[[[[[[]]]]]]]]]]}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]), uint16(0))
		f.Add([]byte(seed[0]), []byte(seed[1]), uint16(40))
	}
	f.Fuzz(func(t *testing.T, state, patch []byte, limit uint16) {
		s := NewState(int(limit))
		check := func(what string) {
			t.Helper()
			size := s.Size()
			if exact := jsonSize(s.Snapshot()); size < exact {
				t.Fatalf("%s: size estimate %d under the state's %d bytes of JSON", what, size, exact)
			}
			// An empty state, {}, is 2 bytes whatever the limit.
			if limit >= 2 && size > int(limit) && jsonSize(s.Snapshot()) > int(limit) {
				t.Fatalf("%s: the state is %d bytes, over its limit of %d", what, size, limit)
			}
		}
		before := jsonOf(t, s.Snapshot())
		if err := s.Replace(state); err != nil {
			if got := jsonOf(t, s.Snapshot()); got != before {
				t.Fatalf("Replace(%q) failed (%v) and changed the state to %s", state, err, got)
			}
		} else {
			var want map[string]any
			if err := json.Unmarshal(state, &want); err != nil {
				t.Fatalf("Replace(%q) took what encoding/json refuses: %v", state, err)
			}
			if !reflect.DeepEqual(normal(t, s.Snapshot()), normal(t, want)) {
				t.Fatalf("Replace(%q): got %s", state, jsonOf(t, s.Snapshot()))
			}
		}
		check("after Replace")

		before = jsonOf(t, s.Snapshot())
		old := normal(t, s.Snapshot())
		if err := s.MergePatch(patch); err != nil {
			if got := jsonOf(t, s.Snapshot()); got != before {
				t.Fatalf("MergePatch(%q) failed (%v) and changed the state to %s", patch, err, got)
			}
			return
		}
		var p map[string]any
		if err := json.Unmarshal(patch, &p); err != nil {
			t.Fatalf("MergePatch(%q) took what encoding/json refuses: %v", patch, err)
		}
		if want := referenceMerge(old, p); !reflect.DeepEqual(normal(t, s.Snapshot()), want) {
			t.Fatalf("MergePatch(%q) on %s: got %s, want %s", patch, before, jsonOf(t, s.Snapshot()), jsonOf(t, want))
		}
		check("after MergePatch")
	})
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("the state cannot be written as JSON: %v", err)
	}
	return string(b)
}

// normal is v as encoding/json reads its JSON, for comparing.
func normal(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(jsonOf(t, v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// referenceMerge is RFC 7386's MergePatch as its text gives it.
func referenceMerge(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	out := map[string]any{}
	for k, v := range t {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = referenceMerge(out[k], v)
		}
	}
	return out
}

// FuzzScanShape: for every state that decodes, scanShape counts exactly
// the objects and arrays decoding found, and what it reserves beforehand
// covers what the decoded state is then held to (footprint), so that
// decoding never holds more than it reserved.
func FuzzScanShape(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"a":[{},{},[]]}`, `{"a":"{[\"]}"}`, `{"\\":"\\\\{","b":[1,"[",{"c":"\u005b"}]}`,
		`{"a":"x\"{"}`, `"{"`, `{"a":1e400}`, `{"a":"é[\u0000"}`, `{"a":[1,-2,true,null,"x",{"b":[[]]}]}`,
		`{"a" : [ 1 , 2 ] , "b" : { "c" : "d" } }`, `{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, boxes, _, err := decodeState(context.Background(), data, "state")
		if err != nil {
			return
		}
		sh, err := scanShape(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := sh.containers(); got != boxes {
			t.Fatalf("scanShape(%q) counted %d containers, decoding found %d", data, got, boxes)
		}
		if held, reserved := footprint(v), sh.memory(); held > reserved {
			t.Fatalf("scanShape(%q) reserves %d, the value is held to %d", data, reserved, held)
		}
	})
}
