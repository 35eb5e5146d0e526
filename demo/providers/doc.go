// Package providers holds the demo's UTCP tool providers, served on
// loopback by `exprd --demo` and used by tests: math over HTTP (a UTCP
// manual at /utcp), a product catalogue over gRPC (go-utcp's
// UTCPService), and units, an MCP server over streamable HTTP (the
// official Go SDK's).
package providers
