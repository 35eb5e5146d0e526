package manual_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
)

// FuzzParseManual: no panic, every error a *ManualError, and what parses
// writes back to JSON that parses the same.
func FuzzParseManual(f *testing.F) {
	utcptest.Seeds(f, "manuals/*.json", "catalog/g*.json", "config/*.json", "config-bad/*.json")
	f.Add([]byte(`{"version": "1.0", "tools": [{"name": "x", "tool_provider": {"provider_type": "http", "url": "https://a"}}]}`))
	f.Add([]byte(`{"tools": [{"name": "x", "inputs": {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "tool_call_template": {"call_template_type": "http"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manual.Parse(data)
		if err != nil {
			var me *manual.Error
			if !errors.As(err, &me) || !errors.Is(err, manual.ErrInvalid) {
				t.Fatalf("error %v (%T) is not a *ManualError", err, err)
			}
			return
		}
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		m2, err := manual.Parse(raw)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", raw, err)
		}
		if len(m2.Tools) != len(m.Tools) {
			t.Fatalf("re-parse: got %d tools, want %d", len(m2.Tools), len(m.Tools))
		}
	})
}
