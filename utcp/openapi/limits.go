package openapi

import (
	"fmt"

	"github.com/exprd/exprd/utcp/manual"
)

// The converted manual's budget. Every tool's schemas carry the
// definitions they reach, so a document whose operations share large
// schemas converts into far more than itself: a hundred operations
// reaching one schema of 3,000 parts made a 370 KB document a manual of
// 100 copies of it. The budget bounds what a document makes exprd build
// and compile by what the document itself weighs.
const (
	// MaxExpansion: the converted manual (its tools as JSON, schemas with
	// their $defs) is at most this many times the document's bytes (as
	// compact JSON). Published documents convert into 0.8 to 2.6 times
	// theirs (testdata/catalogs: OpenAI's 2.0, GitHub's 1.4 to 2.6,
	// Twilio's 0.8 and 0.9).
	MaxExpansion = 8
	// MinConvertedBytes is the budget of a small document, whatever
	// MaxExpansion allows it: a few operations sharing a schema may take
	// many times a short document.
	MinConvertedBytes = 1 << 20
)

// ConvertedBudget is the most a document of docBytes (as JSON) may
// convert into: MaxExpansion times its bytes, and at least
// MinConvertedBytes.
func ConvertedBudget(docBytes int) int {
	return max(MinConvertedBytes, MaxExpansion*docBytes)
}

// TooLargeError is a document whose converted manual would pass its
// budget (ConvertedBudget): conversion stopped there. It is a
// *manual.Error too (errors.As), and matches manual.ErrInvalid.
type TooLargeError struct {
	Manual        string
	Limit         int // bytes: ConvertedBudget(DocumentBytes)
	DocumentBytes int // the document's, as JSON
}

func (e *TooLargeError) Error() string { return e.manualError().Error() }

// Unwrap is the *manual.Error that says the same.
func (e *TooLargeError) Unwrap() error { return e.manualError() }

func (e *TooLargeError) manualError() *manual.Error {
	return &manual.Error{Manual: e.Manual, Msg: fmt.Sprintf(
		"the converted manual would be over %d bytes (openapi.MaxExpansion: %d times the document's %d bytes, at least openapi.MinConvertedBytes %d): its operations reach more schema between them than that; conversion stopped",
		e.Limit, MaxExpansion, e.DocumentBytes, MinConvertedBytes)}
}

// MaxMeanDepth bounds how deeply a document is nested: its bytes' depth
// (how many objects and arrays each is inside of), on average. kin-openapi
// reads a schema by decoding all it holds again at each of its levels, so
// that reading a document costs its bytes times their depth: a schema
// nested 4,000 levels deep, 84 KB, took 15 s. Published documents are
// nested 5.9 to 8.4 deep (testdata/catalogs); a document nested deeper
// than this is refused before kin-openapi reads it.
const MaxMeanDepth = 16

// checkNesting refuses a document (raw: JSON) nested deeper than
// MaxMeanDepth.
func checkNesting(raw []byte) error {
	if n := nesting(raw); n > MaxMeanDepth*len(raw) {
		return fmt.Errorf("the document is nested %.1f levels deep on average, over openapi.MaxMeanDepth (%d): kin-openapi reads it in time that grows with its depth",
			float64(n)/float64(len(raw)), MaxMeanDepth)
	}
	return nil
}

// nesting is the sum of raw's bytes' depth (raw: JSON).
func nesting(raw []byte) int {
	sum, depth, inString, escaped := 0, 0, false, false
	for _, b := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = b == '\\'
			inString = b != '"'
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
		}
		sum += depth
	}
	return sum
}
