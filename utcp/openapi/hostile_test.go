package openapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/hostiletest"
	"github.com/exprd/exprd/utcp/openapi"
)

// layeredDoc is the deep and wide variant: levels of width schemas, each
// schema of a level referring to every schema of the next, the operations
// posting a body of the first level's first schema. Every operation
// reaches all levels*width schemas through width^2 references a level.
func layeredDoc(ops, levels, width int) []byte {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://api.example"}], "paths": {`)
	for i := range ops {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/op%d": {"post": {"operationId": "op%d", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0_0"}}}}, "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0_0"}}}}}}}`, i, i)
	}
	b.WriteString(`}, "components": {"schemas": {`)
	for l := range levels {
		for w := range width {
			if l+w > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"L%d_%d": {"type": "object", "properties": {`, l, w)
			if l+1 < levels {
				for n := range width {
					if n > 0 {
						b.WriteString(",")
					}
					fmt.Fprintf(&b, `"n%d": {"$ref": "#/components/schemas/L%d_%d"}`, n, l+1, n)
				}
			} else {
				b.WriteString(`"leaf": {"type": "integer"}`)
			}
			b.WriteString(`}}`)
		}
	}
	b.WriteString(`}}}`)
	return []byte(b.String())
}

// BenchmarkConvertHostile converts the hostile documents once per
// iteration (run with -benchtime=1x -benchmem for a one-off measure).
func BenchmarkConvertHostile(b *testing.B) {
	for _, tc := range []struct {
		name string
		doc  []byte
	}{
		{"shared-100x3000", hostiletest.SharedRefsDocument(100, 3000)},
		{"layered-100x30x30", layeredDoc(100, 30, 30)},
		{"shared-8x1000", hostiletest.SharedRefsDocument(8, 1000)}, // within every bound: converts, near its budget
		{"layered-2x30x30", layeredDoc(2, 30, 30)},                 // within its budget, each tool past manual.MaxSchemaNodes
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportMetric(float64(len(tc.doc)), "doc-bytes")
			for range b.N {
				m, _, err := openapi.Convert(tc.doc, openapi.Options{Manual: "h"})
				if err == nil {
					b.Logf("%s: %d tools", tc.name, len(m.Tools))
				} else {
					b.Logf("%s: %v", tc.name, err)
				}
			}
		})
	}
}

// swagger2SharedDoc is sharedRefsDoc in Swagger 2: ops operations posting a
// body of Big, whose parts refer to S0, S1, ...
func swagger2SharedDoc(ops, parts int) []byte {
	var b strings.Builder
	b.WriteString(`{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "api.example", "paths": {`)
	for i := range ops {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/op%d": {"post": {"operationId": "op%d", "parameters": [{"in": "body", "name": "body", "schema": {"$ref": "#/definitions/Big"}}], "responses": {"200": {"description": "ok"}}}}`, i, i)
	}
	b.WriteString(`}, "definitions": {"Big": {"type": "object", "properties": {`)
	for i := range parts {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d": {"$ref": "#/definitions/S%d"}`, i, i)
	}
	b.WriteString(`}}`)
	for i := range parts {
		fmt.Fprintf(&b, `, "S%d": {"type": "object", "properties": {"v": {"type": "string"}}}`, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// compactBytes is a document's size as compact JSON, what its budget is
// measured against.
func compactBytes(t *testing.T, doc []byte) int {
	t.Helper()
	v, err := utcp.DecodeDocument(doc, "", "")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw)
}

// TestHostileDocumentsAreBounded: a document whose operations share large
// schemas converts into at most its budget, or stops there with a
// *TooLargeError; what does convert carries in each tool only the
// definitions it reaches.
func TestHostileDocumentsAreBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		doc      []byte
		tooLarge bool
		tools    int
		defs     int // $defs of each tool's inputs, when it converts
	}{
		{"100 operations sharing a schema of 3,000 parts", hostiletest.SharedRefsDocument(100, 3000), true, 0, 0},
		{"the same in Swagger 2", swagger2SharedDoc(100, 3000), true, 0, 0},
		{"100 operations reaching 30 levels of 30 schemas, each referring to the next level's 30", layeredDoc(100, 30, 30), true, 0, 0},
		{"4 operations sharing a schema of 600 parts", hostiletest.SharedRefsDocument(4, 600), false, 4, 601},
		{"the same in Swagger 2", swagger2SharedDoc(4, 600), false, 4, 601},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			budget := openapi.ConvertedBudget(compactBytes(t, tc.doc))
			m, _, err := openapi.Convert(tc.doc, openapi.Options{Manual: "h"})
			if tc.tooLarge {
				var tl *openapi.TooLargeError
				var me *manual.Error
				if !errors.As(err, &tl) || !errors.As(err, &me) || !errors.Is(err, manual.ErrInvalid) {
					t.Fatalf("got %v, want a *TooLargeError", err)
				}
				if tl.Limit != budget || !strings.Contains(err.Error(), "openapi.MaxExpansion") {
					t.Errorf("got limit %d (%v), want %d, named", tl.Limit, err, budget)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			weighs := 0
			for _, tool := range m.Tools {
				raw, _ := json.Marshal(tool)
				weighs += len(raw)
				var in struct {
					Defs map[string]any `json:"$defs"`
				}
				_ = json.Unmarshal(tool.Inputs, &in)
				if len(in.Defs) != tc.defs {
					t.Errorf("%s: %d $defs, want %d", tool.Name, len(in.Defs), tc.defs)
				}
			}
			if len(m.Tools) != tc.tools || weighs > budget {
				t.Errorf("got %d tools weighing %d bytes, want %d within %d", len(m.Tools), weighs, tc.tools, budget)
			}
		})
	}
}

// TestToolsCarryOnlyWhatTheyReach: each tool's schema holds the
// definitions it reaches, through references, and no others.
func TestToolsCarryOnlyWhatTheyReach(t *testing.T) {
	t.Parallel()
	ref := func(s string) string { return `{"$ref": "#/components/schemas/` + s + `"}` }
	doc := doc3(`{"/a": {"post": `+op("a", ref("A"), ref("D"))+`}, "/b": {"post": `+op("b", ref("B"), `{"type": "object"}`)+`}}`,
		`{"A": {"type": "object"}, "B": {"type": "object", "properties": {"c": `+ref("C")+`}}, "C": {"type": "object", "properties": {"b": `+ref("B")+`}}, "D": {"type": "string"}, "Unused": {"type": "integer"}}`)
	m, _, err := openapi.Convert(doc, openapi.Options{Manual: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defsOf := func(raw json.RawMessage) []string {
		var s struct {
			Defs map[string]any `json:"$defs"`
		}
		_ = json.Unmarshal(raw, &s)
		return slices.Sorted(maps.Keys(s.Defs))
	}
	want := map[string][2][]string{"a": {{"A"}, {"D"}}, "b": {{"B", "C"}, nil}}
	for _, tool := range m.Tools {
		if in, out := defsOf(tool.Inputs), defsOf(tool.Outputs); !slices.Equal(in, want[tool.Name][0]) || !slices.Equal(out, want[tool.Name][1]) {
			t.Errorf("%s: $defs of inputs %v, outputs %v; want %v", tool.Name, in, out, want[tool.Name])
		}
	}
	if err := m.Tools[1].ValidateArgs(map[string]any{"body": map[string]any{"c": map[string]any{"b": map[string]any{"c": 1}}}}); err == nil {
		t.Errorf("b: a number where C is: got no error, want the cycle B → C → B checked")
	}
}

// TestNestingCountsThroughReferences: a chain of references nests as deep
// as the schemas it joins, as if written inline: at maxSchemaDepth (64) the
// operation converts, one past it is skipped.
func TestNestingCountsThroughReferences(t *testing.T) {
	t.Parallel()
	chain := func(leaf string) []byte {
		// The body refers to S0 (depth 1); each S_i nests its reference to
		// S_i+1 one level down (2 more a link); 31 links reach depth 63, the
		// leaf's own nesting adds the rest.
		var b strings.Builder
		b.WriteString(`{`)
		for i := range 31 {
			fmt.Fprintf(&b, `"S%d": {"type": "object", "properties": {"n": {"$ref": "#/components/schemas/S%d"}}}, `, i, i+1)
		}
		b.WriteString(`"S31": ` + leaf + `}`)
		return doc3(`{"/a": {"post": `+op("a", `{"$ref": "#/components/schemas/S0"}`, `{"type": "object"}`)+`}, "/b": {"post": `+op("b", `{"type": "object"}`, `{"type": "object"}`)+`}}`, b.String())
	}
	for _, tc := range []struct {
		name, leaf string
		converts   bool
	}{
		{"at the limit", `{"type": "object", "properties": {"x": {}}}`, true},
		{"one past it", `{"type": "object", "properties": {"x": {"properties": {"y": {}}}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, skipped, err := openapi.Convert(chain(tc.leaf), openapi.Options{Manual: "m"})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(m.Tools) == 2; got != tc.converts {
				t.Fatalf("got %d tools, skipped %v; want a converted: %v", len(m.Tools), skipped, tc.converts)
			}
			if !tc.converts && (len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "schema nested deeper than 64")) {
				t.Errorf("skipped: got %v, want a for its nesting", skipped)
			}
		})
	}
}

// countdownCtx is a context that ends after its Err has been asked n
// times: where the conversion checks it decides when it stops.
type countdownCtx struct {
	context.Context
	n, asked atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.asked.Add(1) > c.n.Load() {
		return context.Canceled
	}
	return nil
}

// TestConversionStopsWithItsContext: a conversion checks its context as it
// goes (operation by operation, definition by definition, tool by tool),
// and returns the context's error, not a manual, once it ends.
func TestConversionStopsWithItsContext(t *testing.T) {
	t.Parallel()
	doc := hostiletest.SharedRefsDocument(20, 100)
	ctx := &countdownCtx{Context: context.Background()}
	ctx.n.Store(1 << 40)
	if _, _, err := openapi.ConvertContext(ctx, doc, openapi.Options{Manual: "h"}); err != nil {
		t.Fatalf("never ending: %v", err)
	}
	checks := ctx.asked.Load()
	if checks < 20+101+20 {
		t.Fatalf("asked %d times, want at least once an operation, a definition and a tool", checks)
	}
	for _, after := range []int64{0, 1, 10, checks / 4, checks / 2, checks - 1} {
		ctx := &countdownCtx{Context: context.Background()}
		ctx.n.Store(after)
		m, _, err := openapi.ConvertContext(ctx, doc, openapi.Options{Manual: "h"})
		if !errors.Is(err, context.Canceled) || m != nil {
			t.Errorf("ended after %d of %d checks: got %v, %v; want context.Canceled", after, checks, m, err)
		}
		if asked := ctx.asked.Load(); asked > after+3 {
			t.Errorf("ended after %d checks: asked %d times, want it to stop at the next", after, asked)
		}
	}
}

// TestDiagnosedDocumentsAreBounded: kin-openapi says why a document that
// converts to nothing is wrong only when it is at most MaxDiagnosedBytes;
// a larger one gets the conversion's own reason.
func TestDiagnosedDocumentsAreBounded(t *testing.T) {
	t.Parallel()
	// An operation whose only parameter refers to another document: kin-
	// openapi refuses the document; the conversion skips the operation.
	doc := func(pad int) []byte {
		return []byte(`{"openapi": "3.0.0", "info": {"title": "t", "version": "1", "description": "` + strings.Repeat("x", pad) + `"}, "servers": [{"url": "https://a.example"}], "paths": {"/x": {"get": {"operationId": "x", "parameters": [{"in": "query", "name": "q", "schema": {"$ref": "other.yaml#/X"}}], "responses": {"200": {"description": "ok"}}}}}}`)
	}
	pad := openapi.MaxDiagnosedBytes - compactBytes(t, doc(0))
	for _, tc := range []struct {
		name string
		pad  int
		want string
	}{
		{"at the limit", pad, "not a valid OpenAPI document"},
		{"one past it", pad + 1, `none of the document's 1 operations could be converted; x: parameters.q: $ref "other.yaml#/X" does not resolve inside the document`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := compactBytes(t, doc(tc.pad)); got != openapi.MaxDiagnosedBytes+tc.pad-pad {
				t.Fatalf("the document is %d bytes", got)
			}
			_, _, err := openapi.Convert(doc(tc.pad), openapi.Options{Manual: "m"})
			if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDeepDocumentsAreRefused: kin-openapi reads a schema in time that
// grows with its depth (4,000 levels, 84 KB: 15 s); a document nested
// deeper than openapi.MaxMeanDepth on average is refused before it is
// read, OpenAPI 3 or Swagger 2.
func TestDeepDocumentsAreRefused(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"properties": {"a": `, 4000) + `{}` + strings.Repeat(`}}`, 4000)
	for name, doc := range map[string]string{
		"OpenAPI 3": `{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://a.example"}], "paths": {}, "components": {"schemas": {"D": ` + deep + `}}}`,
		"Swagger 2": `{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "a.example", "paths": {}, "definitions": {"D": ` + deep + `}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, _, err := openapi.Convert([]byte(doc), openapi.Options{Manual: "m"})
			if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), "openapi.MaxMeanDepth") {
				t.Errorf("got %v, want refused for its depth", err)
			}
		})
	}
}

// TestConversionSharesItsTurn: converting a document on a caller's turn
// (turns.Compute, as the registry does) gives the turn to another
// caller that waits once a slice is over, long before the conversion
// ends, and takes it back to finish it.
func TestConversionSharesItsTurn(t *testing.T) {
	t.Parallel()
	doc := hostiletest.SharedRefsDocument(100, 100)
	tr := turns.NewTurns(1)
	ctx := turns.With(context.Background(), tr)
	var lightAt, doneAt time.Time
	light := make(chan struct{})
	err := turns.Compute(ctx, "heavy", func(ctx context.Context) error {
		go func() {
			defer close(light)
			if tr.Acquire(context.Background(), "light") == nil {
				lightAt = time.Now()
				tr.Release("light", time.Microsecond)
			}
		}()
		m, _, err := openapi.ConvertContext(ctx, doc, openapi.Options{Manual: "h"})
		doneAt = time.Now()
		if err == nil && len(m.Tools) != 100 {
			return fmt.Errorf("%d tools, want 100", len(m.Tools))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	<-light
	if lightAt.IsZero() || !lightAt.Before(doneAt) {
		t.Fatalf("the other caller had its turn at %v, the conversion ended at %v: want it in between", lightAt, doneAt)
	}
}
