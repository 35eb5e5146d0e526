package openapi

import (
	"strings"
	"testing"
)

func TestOperationDescription(t *testing.T) {
	long := strings.Repeat("word ", MaxDescriptionBytes/5) // exactly MaxDescriptionBytes, the last a space
	over := strings.Repeat("a", MaxDescriptionBytes-2) + " é" + " more"
	for _, c := range []struct {
		name          string
		summary, desc string
		want          string
	}{
		{"summary only", "Rename a branch", "", "Rename a branch"},
		{"description only", "", "Renames a branch.", "Renames a branch."},
		{"both", "Rename a branch", "Renames a branch in a repository.", "Rename a branch\n\nRenames a branch in a repository."},
		{"the same", "Rename a branch", " Rename a branch ", "Rename a branch"},
		{"neither", "", "", ""},
		{"at the limit", "S", long, "S\n\n" + strings.TrimSpace(long)},
		{"a word across the limit left out (é's two bytes straddle it)", "S", over, "S\n\n" + strings.Repeat("a", MaxDescriptionBytes-2) + " …"},
		{"one word past the limit", "S", strings.Repeat("a", MaxDescriptionBytes+1), "S\n\n" + strings.Repeat("a", MaxDescriptionBytes) + " …"},
		{"a word that ends at the limit stays", "S", strings.Repeat("a", MaxDescriptionBytes) + " more", "S\n\n" + strings.Repeat("a", MaxDescriptionBytes) + " …"},
		{"no space: cut at a rune's start", "S", strings.Repeat("a", MaxDescriptionBytes-1) + "éé", "S\n\n" + strings.Repeat("a", MaxDescriptionBytes-1) + " …"},
		{"whitespace only", "S", " \n\t ", "S"},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := map[string]any{}
			if c.summary != "" {
				op["summary"] = c.summary
			}
			if c.desc != "" {
				op["description"] = c.desc
			}
			if got := operationDescription(op); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
