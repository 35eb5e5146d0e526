// Package openapi converts OpenAPI 3 and Swagger 2 documents into UTCP
// manuals of `http` tools, as the reference UTCP clients do
// (docs/utcp-compat.md#openapi). Convert converts a document; Converter is the
// utcp.Converter a registry reads such documents through
// (utcp.WithConverter(openapi.Converter{}), which utcpall.New sets), from a
// URL, a file or a discovery template.
//
// Each operation with an operationId becomes a tool of that name; path and
// query parameters become inputs, header parameters header_fields, the
// request body the `body` input; the URL is servers[0] (resolved against
// where the document was fetched from) plus the path. Each template
// carries the document's serialisation of its parameters in
// parameter_styles (style and explode; a Swagger 2 collectionFormat as its
// OpenAPI 3 equivalent), which httptransport follows. Schemas become JSON
// Schema 2020-12 with the document's components under $defs. Security
// schemes become the tool's auth with per-scheme ${VARIABLE} placeholders,
// or the discovery template's auth_tools when of the same kind.
//
// A document is read tolerantly: an operation that cannot be converted is
// skipped and reported (manual.SkippedTool), an output schema that is not
// valid is dropped; the document is refused (*manual.Error) only when
// nothing of it converts. A document fetched from a remote host may not aim
// its calls at loopback. kin-openapi reads the document; a panic in it is a
// refused document.
package openapi
