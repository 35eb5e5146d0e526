// Package readme tests the README's tour and the docs' grpcurl examples:
// every command block runs against a real exprd --demo and must print what
// the README or the page shows right after it ("..." for what is trimmed
// or differs between runs).
package readme
