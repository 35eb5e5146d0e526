// Package search is exprd's tool search: an immutable utcp.Index
// (utcp.WithIndex(search.New()), which utcpall.New sets) that ranks a
// registry's tools for a query written as a person would ask ("send an
// email to a customer").
//
// Ranking is BM25F over each tool's name, its manual's name, tags,
// description, input property names (three levels down, at most
// maxSchemaTextProps) and what the schema says of them, and an HTTP tool's
// URL path, with the Snowball stemmer, a few synonyms and everyday
// phrasings, and terms sharing a long prefix ("reservation" ~ "reserve")
// counted at a lower weight; the values a query gives (quoted text, URLs,
// addresses, numbers, identifiers, file names, paths like
// octo-org/billing-service: splitArguments) count argumentWeight of a
// word; a query that is a tool's full or short name ranks it first.
// Ties are broken by name, and a score is summed in the same order every
// time, so a ranking is reproducible to the bit.
//
// An Index never changes: With derives the next one for a registration or
// removal, analysing only the tools added and copying only the paths of
// the term tree (a persistent treap) whose frequencies change; a search of
// a snapshot scores only the tools sharing a term with the query (postings
// built on its first search). TrimQuery cuts a prompt to a query within
// utcp.MaxQueryBytes and utcp.MaxQueryTerms.
//
// The figures on the published catalogues (utcp/testdata/catalogs) are in
// searcheval_test.go and BENCHMARKS.md.
package search
