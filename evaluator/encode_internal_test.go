package evaluator

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func stdJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return string(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
}

func TestAppendJSON(t *testing.T) {
	t.Parallel()
	tests := []any{
		nil, true, false, 0, -7, math.MaxInt64, 0.0, 1.5, -0.000001, 0.0000001, 1e20, 1e21, 123456789.125, math.SmallestNonzeroFloat64, math.MaxFloat64,
		"", "plain", "q\"b\\s/", "\b\f\n\r\t\x00\x1f\x7f", "<&>", "é – 漢字 🙂", "\u2028\u2029", "bad \xff\xfe utf8", "\xed\xa0\x80",
		[]any{}, []any{1, "a", nil, []any{true}}, map[string]any{}, map[string]any{"b": 1, "a": []any{map[string]any{"z": 1, "y": 2}}, "é": "x", "A": nil},
	}
	for _, v := range tests {
		if got, want := string(appendJSON(nil, v)), stdJSON(v); got != want {
			t.Errorf("appendJSON(%#v) = %s, want %s", v, got, want)
		}
	}
}

func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, -3e-9, "x\u2028"], "b": null}`, `"\ud800"`, `1e300`, `[true, false, {}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if got, want := string(appendJSON(nil, v)), stdJSON(v); got != want {
			t.Fatalf("appendJSON = %s, encoding/json = %s", got, want)
		}
	})
}

func TestJSONSize(t *testing.T) {
	t.Parallel()
	for _, v := range []any{nil, true, false, 1.5, 1e21, -0.000001, "", "a\"\\\b\f\n\r\t\x01<>&é\u2028\xff", []any{}, []any{1.0, "x", nil},
		map[string]any{}, map[string]any{"a": []any{map[string]any{"é\n": 2.0}}, "b": "c"}} {
		if got, want := jsonSize(v), len(appendJSON(nil, v)); got != want {
			t.Errorf("jsonSize(%#v) = %d, want %d", v, got, want)
		}
	}
}
