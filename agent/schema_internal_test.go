package agent

import (
	"fmt"
	"strings"
	"testing"
)

// The schema cache is bounded whoever sends schemas: a thousand distinct
// ones leave SchemaCacheSize, a schema past MaxCachedSchemaBytes is
// compiled but not kept, and one at the limit is kept.
func TestSchemaCacheBounded(t *testing.T) {
	for i := range 1000 {
		if _, err := compileSchema(fmt.Appendf(nil, `{"type": "object", "title": "t%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := schemas.Len(); got != SchemaCacheSize {
		t.Errorf("cached schemas: got %d, want %d", got, SchemaCacheSize)
	}
	sized := func(n int) []byte {
		head := `{"type": "object", "description": "`
		return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
	}
	at, past := sized(MaxCachedSchemaBytes), sized(MaxCachedSchemaBytes+1)
	a1, _ := compileSchema(at)
	a2, _ := compileSchema(at)
	if a1 == nil || a1 != a2 {
		t.Errorf("a schema at the size limit: compiled twice, want it cached")
	}
	p1, _ := compileSchema(past)
	p2, _ := compileSchema(past)
	if p1 == nil || p1 == p2 {
		t.Errorf("a schema one past the size limit: got the cached one, want it compiled each time")
	}
}
