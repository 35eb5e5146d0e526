package utcp

import (
	"context"

	"github.com/exprd/exprd/utcp/manual"
)

// Converter reads documents that are not UTCP manuals as manuals: package
// openapi's reads OpenAPI 3 and Swagger 2 (utcp.WithConverter(openapi.Converter{})).
// The registry gives it every discovered or file document that is not a
// manual; it implements fmt.Stringer to name what it reads in the error
// refusing a document that is neither ("an OpenAPI document (openapi,
// swagger or paths)").
type Converter interface {
	// Converts reports whether doc (decoded JSON or YAML, numbers as
	// json.Number) is a document Convert reads.
	Converts(doc any) bool
	// Convert reads doc as a manual, its tools named as the document names
	// its operations, and reports what it left out. Its errors are
	// *manual.Error, or ctx's error when ctx ended first: what a document
	// makes it build is bounded, and stops with ctx. manual.ReadConverted
	// reads the tools of a manual built as JSON.
	Convert(ctx context.Context, doc any, opts ConvertOptions) (*manual.Manual, []manual.SkippedTool, error)
}

// ConvertOptions say where a converted document came from.
type ConvertOptions struct {
	// Manual is the manual's (sanitised) name: it names the generated
	// call templates, and the converter's errors.
	Manual string
	// SpecURL is where the document was fetched from: relative server URLs
	// resolve against it, and a document fetched from a host that is not
	// loopback may not send calls to loopback. Empty for files and text.
	SpecURL string
	// AuthTools is used as the auth of every operation that requires auth of
	// the same kind (the discovery template's auth_tools).
	AuthTools *manual.Auth
	// Headers are sent by every generated tool.
	Headers map[string]string
}
