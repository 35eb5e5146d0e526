// Package providers holds the demo's UTCP tool providers, served on
// loopback by `exprd --demo` and used by tests: math over HTTP (a UTCP
// manual at /utcp) and a product catalogue over gRPC (go-utcp's
// UTCPService).
package providers
