// Package jsonvalue decodes JSON text into Go's generic JSON values, faster
// than encoding/json and with fewer allocations.
//
// It exists for the service's hot path: clients send state snapshots (often
// around a megabyte) and merge patches as JSON, and the service only ever
// needs them as map[string]any trees. encoding/json.Unmarshal into an any
// first validates the whole input with a byte-at-a-time state machine and then
// walks it a second time; [Decode] does one pass over the bytes instead,
// copies each string at most once, reuses the object keys and short string
// values that repeat through a document (and its successors), boxes small
// integers once for all, and sizes every map and slice exactly.
//
// # Contract
//
// [Decode] accepts one JSON value (RFC 8259), optionally surrounded by
// whitespace, and returns exactly what encoding/json.Unmarshal stores into an
// any for the same input:
//
//   - objects become map[string]any (empty ones too, never nil), and when a
//     key repeats the last value wins;
//   - arrays become []any (empty ones too, never nil);
//   - strings become string, with every escape decoded; an invalid or
//     unpaired UTF-16 surrogate escape and every byte of invalid UTF-8 become
//     U+FFFD, just as encoding/json replaces them;
//   - numbers become float64 as strconv.ParseFloat rounds them, and a number
//     beyond the float64 range is an error, as it is for encoding/json;
//   - true and false become bool, null becomes nil.
//
// It rejects exactly the inputs encoding/json rejects, and for every syntax
// error it returns a [*SyntaxError] carrying encoding/json's description and
// offset, so callers can switch between the two without seeing a difference.
// A number out of range is reported as a *SyntaxError too, but only when the
// text has no syntax error, since encoding/json reports a syntax error first.
//
// Decode does not keep or modify its input: the returned values share no
// memory with data. It is safe for concurrent use.
//
// # Depth
//
// Arrays and objects may nest at most [MaxDepth] (10000) levels deep, the
// same limit as encoding/json. Deeper input is a *SyntaxError
// ("exceeded max depth"), never a stack overflow, whatever its size.
package jsonvalue
