package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
)

// TestChargeAtTheBudget: a tool that takes exactly what is left of the
// budget converts; one byte more is a *TooLargeError naming the limit.
func TestChargeAtTheBudget(t *testing.T) {
	t.Parallel()
	tool := map[string]any{"name": "t", "inputs": map[string]any{"type": "object"}}
	raw, _ := json.Marshal(tool)
	in := &reached{size: 100}
	out := &reached{size: 20}
	size := len(raw) + in.size + out.size
	for _, tc := range []struct {
		name   string
		budget int
		fits   bool
	}{
		{"at the budget", size, true},
		{"one byte short", size - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &converter{opts: Options{Manual: "m"}, budget: tc.budget, docBytes: 10}
			err := c.charge(tool, in, out)
			if tc.fits {
				if err != nil || c.budget != 0 {
					t.Fatalf("got %v, budget left %d; want it charged to 0", err, c.budget)
				}
				return
			}
			var tl *TooLargeError
			var me *manual.Error
			if !errors.As(err, &tl) || !errors.As(err, &me) || !errors.Is(err, manual.ErrInvalid) {
				t.Fatalf("got %v (%T), want a *TooLargeError that is a *manual.Error", err, err)
			}
			if tl.Limit != MinConvertedBytes || tl.DocumentBytes != 10 {
				t.Errorf("got limit %d of a %d-byte document, want %d (the floor) of 10", tl.Limit, tl.DocumentBytes, MinConvertedBytes)
			}
		})
	}
}

func TestConvertedBudget(t *testing.T) {
	t.Parallel()
	at := MinConvertedBytes / MaxExpansion
	for _, tc := range []struct{ doc, want int }{
		{0, MinConvertedBytes},
		{at, MinConvertedBytes},
		{at + 1, MaxExpansion * (at + 1)},
		{8 << 20, MaxExpansion * (8 << 20)},
	} {
		if got := ConvertedBudget(tc.doc); got != tc.want {
			t.Errorf("ConvertedBudget(%d): got %d, want %d", tc.doc, got, tc.want)
		}
	}
}

// TestChargedCoversTheManual: what the converter charges a document is at
// least what its converted manual weighs as JSON, for the published
// documents and the hostile ones that fit: the budget bounds the manual
// by construction.
func TestChargedCoversTheManual(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../testdata/catalogs/*.json")
	files = append(files, "../testdata/openapi/petstore.yaml")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			v, err := utcp.DecodeDocument(data, "", f)
			if err != nil {
				t.Fatal(err)
			}
			root, raw, err := loadOpenAPI(v.(map[string]any))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			c := &converter{ctx: ctx, root: root, opts: Options{Manual: "m", SpecURL: "https://spec.example/x"}, swagger2: isSwagger2(v.(map[string]any)),
				schemas: newSchemaScope(ctx, root, "m"), docBytes: len(raw), budget: ConvertedBudget(len(raw))}
			manual, _, err := c.convert()
			if err != nil {
				t.Fatal(err)
			}
			charged := ConvertedBudget(len(raw)) - c.budget
			weighs := 0
			for _, tool := range manual["tools"].([]any) {
				b, _ := json.Marshal(tool)
				weighs += len(b)
			}
			if weighs > charged || charged > ConvertedBudget(len(raw)) {
				t.Errorf("the tools weigh %d bytes, %d were charged of a budget of %d", weighs, charged, ConvertedBudget(len(raw)))
			}
			t.Logf("the tools weigh %d bytes, %.2f times the document's %d", weighs, float64(weighs)/float64(len(raw)), len(raw))
		})
	}
}
