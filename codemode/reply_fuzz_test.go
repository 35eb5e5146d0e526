package codemode

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseReply: whatever the model answers, reading its plan never
// panics and fails only as invalid-plan; a plan read writes back to JSON
// that reads the same, and the Markdown fence and words a model puts
// around its JSON object change nothing.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`{"tools": ["math.add"], "code": "math.add({a: 1, b: 2})", "stream": false}`,
		`{"handled": false}`, `{"tools": [], "code": ""}`, `{"tools": null, "code": "1"}`,
		"```json\n{\"tools\": [\"math.add\"], \"code\": \"1\"}\n```",
		`Here is the plan: {"tools": ["a"], "code": "}"} and that is all}`,
		`{"tools": ["a"], "code": "1", "extra": true}`, `{"tools": "a"}`, `{"code": "1"} {"code": "2"}`,
		`}{`, `{`, ``, `{"handled": null, "stream": "yes"}`, `{"code": "\ud800"}`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := parseReply(text)
		if i, j := strings.Index(text, "{"), strings.LastIndex(text, "}"); i >= 0 && j > i {
			fenced, ferr := parseReply("The plan:\n```json\n" + text + "\n```\nDone.")
			if (err == nil) != (ferr == nil) || err == nil && !reflect.DeepEqual(r, fenced) {
				t.Fatalf("%q: read %+v (%v) alone, %+v (%v) in a fence", text, r, err, fenced, ferr)
			}
		}
		if err != nil {
			if err.Reason != InvalidPlan {
				t.Fatalf("%q: got reason %s, want %s", text, err.Reason, InvalidPlan)
			}
			return
		}
		raw, merr := json.Marshal(r)
		if merr != nil {
			t.Fatalf("Marshal %+v: %v", r, merr)
		}
		again, err := parseReply(string(raw))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%q: read %+v, its JSON %s reads %+v (%v)", text, r, raw, again, err)
		}
	})
}
