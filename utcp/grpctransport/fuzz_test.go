package grpctransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/grpctransport"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// FuzzTemplate registers a manual whose tool has a fuzzed grpc template (a
// discovered manual's templates are the provider's to write). The property:
// no panic, and a refusal is a *manual.Error (or, for a ${VAR} the
// operator has not bound, a *vars.NotFoundError). Nothing is
// dialled.
// Seeds: testdata/templates.json.
func FuzzTemplate(f *testing.F) {
	raw, err := os.ReadFile("testdata/templates.json")
	if err != nil {
		f.Fatal(err)
	}
	var cases []struct {
		Template json.RawMessage `json:"template"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add(string(c.Template))
	}
	r, err := utcp.New(utcp.WithEgress(egress.MustParse("loopback")), utcp.WithTransport(grpctransport.Type, grpctransport.New))
	if err != nil {
		f.Fatal(err)
	}
	defer r.Close()
	f.Fuzz(func(t *testing.T, fields string) {
		var tmpl map[string]any
		if json.Unmarshal([]byte(fields), &tmpl) != nil || tmpl == nil {
			return
		}
		tmpl["call_template_type"] = "grpc"
		doc, err := json.Marshal(map[string]any{"utcp_version": "1.1.0", "tools": []any{map[string]any{"name": "t", "tool_call_template": tmpl}}})
		if err != nil {
			return
		}
		_, err = r.Register(context.Background(), "fuzz", utcp.FromText(string(doc)).AllowProtocols("grpc"))
		if err == nil {
			if err := r.Deregister("fuzz"); err != nil {
				t.Fatal(err)
			}
			return
		}
		// A ${VAR} in the template that the operator has not bound is
		// refused as such (testdata/fuzz/FuzzTemplate/35ff40b3ebb9713d:
		// `$000` in host).
		var me *manual.Error
		var ve *vars.NotFoundError
		if !errors.As(err, &me) && !errors.As(err, &ve) {
			t.Fatalf("got %T %v, want a *manual.Error or a *vars.NotFoundError", err, err)
		}
	})
}
