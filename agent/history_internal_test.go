package agent

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/exprd/exprd/model"
)

// stringSeeds are strings JSON escapes in each of its ways.
var stringSeeds = []string{"", "plain", `"quoted" \ back`, "\b\f\n\r\t", "\x00\x01\x1f", "<a href=x>&amp;</a>",
	"\u2028\u2029", "é ü 日本", "\xff\xfe bad", "\xe2\x80", "mixed \"<\xff\u2028\n"}

// stringBytes is the length encoding/json gives a string, by default.
func TestStringBytesIsJSONLength(t *testing.T) {
	t.Parallel()
	for _, s := range stringSeeds {
		b, _ := json.Marshal(s)
		if got := stringBytes(s); got != int64(len(b)) {
			t.Errorf("stringBytes(%q) = %d, want %d (%s)", s, got, len(b), b)
		}
	}
}

func FuzzStringBytes(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, _ := json.Marshal(s)
		if got := stringBytes(s); got != int64(len(b)) {
			t.Errorf("stringBytes(%q) = %d, want %d", s, got, len(b))
		}
	})
}

// rawBytes is never less than what encoding/json writes for raw JSON.
func TestRawBytesBoundsJSON(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{}`, `{ "a" : [1, 2,  3] }`, `{"d":"<b> & \u2028"}`, "{\"d\":\"\u2028\u2029 <>&\"}", `{"x":"\u00e9"}`} {
		b, err := json.Marshal(struct {
			P json.RawMessage `json:"p"`
		}{json.RawMessage(raw)})
		if err != nil {
			t.Fatal(err)
		}
		if got, sent := rawBytes(json.RawMessage(raw)), int64(len(b)-len(`{"p":}`)); got < sent {
			t.Errorf("rawBytes(%s) = %d, less than the %d encoding/json writes", raw, got, sent)
		}
	}
}

// messageBytes is never less than the JSON of a message in the wire form
// with every member present, the largest form a provider sends.
func TestMessageBytesBoundsWireForm(t *testing.T) {
	t.Parallel()
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type wire struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCalls  []call `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	}
	for _, s := range stringSeeds {
		m := model.Assistant(s, model.ToolCall{ID: s, Name: s, Arguments: s}, model.ToolCall{ID: "b", Name: "n", Arguments: "{}"})
		m.ToolCallID = s
		w := wire{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			w.ToolCalls = append(w.ToolCalls, call{ID: c.ID, Type: "function", Function: fn{c.Name, c.Arguments}})
		}
		b, _ := json.Marshal(w)
		if got := messageBytes(&m); got < int64(len(b)) {
			t.Errorf("messageBytes = %d, less than the wire form's %d: %s", got, len(b), b)
		}
	}
}

// editDistance is Levenshtein's distance, capped at k+1.
func TestEditDistance(t *testing.T) {
	t.Parallel()
	full := func(a, b []byte) int {
		prev := make([]int, len(b)+1)
		for j := range prev {
			prev[j] = j
		}
		for i := 1; i <= len(a); i++ {
			cur := make([]int, len(b)+1)
			cur[0] = i
			for j := 1; j <= len(b); j++ {
				d := prev[j-1]
				if a[i-1] != b[j-1] {
					d++
				}
				cur[j] = min(d, prev[j]+1, cur[j-1]+1)
			}
			prev = cur
		}
		return prev[len(b)]
	}
	r := rand.New(rand.NewPCG(1, 2))
	word := func() []byte {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = "abc"[r.IntN(3)]
		}
		return b
	}
	for range 20000 {
		a, b, k := word(), word(), r.IntN(5)
		if got, want := editDistance(a, b, k), min(full(a, b), k+1); got != want {
			t.Fatalf("editDistance(%q, %q, %d) = %d, want %d", a, b, k, got, want)
		}
	}
}
