package search_test

import (
	"context"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/search"
)

// An MCP tool's title and hints are in its search document.
func TestTitleAndHintsAreSearched(t *testing.T) {
	t.Parallel()
	reg, err := utcp.New(utcp.WithIndex(search.New()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	manual := `{"utcp_version": "1.0.1", "tools": [
	  {"name": "a", "title": "Quarterly ledger", "description": "Sums.", "annotations": {"readOnlyHint": true},
	   "tool_call_template": {"call_template_type": "text", "content": "{}"}},
	  {"name": "b", "description": "Sums too.", "annotations": {"destructiveHint": true},
	   "tool_call_template": {"call_template_type": "text", "content": "{}"}}]}`
	if _, err := reg.Register(context.Background(), "m", utcp.FromText(manual)); err != nil {
		t.Fatal(err)
	}
	for query, want := range map[string]string{"quarterly ledger": "m.a", "read-only sums": "m.a", "destructive": "m.b"} {
		got, err := reg.SearchContext(context.Background(), query, 1)
		if err != nil || len(got) == 0 || got[0].Tool.Name != want {
			t.Errorf("%q: got %v, %v; want %s first", query, got, err, want)
		}
	}
}
