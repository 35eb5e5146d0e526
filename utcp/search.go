package utcp

import (
	"context"
	"fmt"

	"github.com/exprd/exprd/utcp/manual"
)

// Index ranks a registry's tools for a query (package search has exprd's:
// utcp.WithIndex(search.New())). An Index never changes once built: the
// registry derives the next one with With, under its lock, for each
// registration, replacement or removal, and searches read the snapshot
// they were given without locks. An Index must be safe for concurrent
// searches.
type Index interface {
	// With returns the index of this one's tools less those named in
	// removed (full names, sorted; a name it does not hold is ignored)
	// plus added (tools it does not hold, full-named, in any order). This
	// index is left as it was.
	With(removed []string, added []*manual.Tool) Index
	// Search ranks the tools for query and returns the best limit of them
	// (all that match when limit <= 0), best first. A query of more than
	// MaxQueryTerms distinct terms is a *QueryError; a cancelled ctx stops
	// the ranking with its error.
	Search(ctx context.Context, query string, limit int) ([]SearchResult, error)
}

// SearchResult is one ranked tool.
type SearchResult struct {
	Tool  *manual.Tool
	Score float64
}

// Search limits. A query is compared with every tool and each of its
// longer terms with the vocabulary, so its size bounds the work.
const (
	// MaxQueryBytes bounds a query's length.
	MaxQueryBytes = 4096
	// MaxQueryTerms bounds the distinct terms a query has once stop words
	// are dropped.
	MaxQueryTerms = 32
)

// QueryError is a search query past MaxQueryBytes or MaxQueryTerms.
type QueryError struct {
	What  string // "bytes" or "terms"
	Limit int
	Got   int
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("utcp: the query has %d %s, over the limit of %d", e.Got, e.What, e.Limit)
}

// Is reports whether target is ErrInvalidArguments.
func (e *QueryError) Is(target error) bool { return target == manual.ErrInvalidArguments }

// Search ranks every registered tool for a query written as a person would
// ask ("send an email to a customer") with the registry's Index
// (WithIndex), and returns the best limit of them (all that match when
// limit <= 0), best first. A registry without an index finds nothing.
//
// Search is SearchContext without a deadline, for a query known to be
// within the limits (see search.TrimQuery); a query past them ranks
// nothing.
func (r *Registry) Search(query string, limit int) []SearchResult {
	out, _ := r.SearchContext(context.Background(), query, limit)
	return out
}

// SearchContext is Search under ctx: a query past the limits is a
// *QueryError, and a cancelled ctx stops the ranking (its error).
func (r *Registry) SearchContext(ctx context.Context, query string, limit int) ([]SearchResult, error) {
	if len(query) > MaxQueryBytes {
		return nil, &QueryError{What: "bytes", Limit: MaxQueryBytes, Got: len(query)}
	}
	ix := r.cat.Load().index
	if ix == nil {
		return nil, ctx.Err()
	}
	return ix.Search(ctx, query, limit)
}
