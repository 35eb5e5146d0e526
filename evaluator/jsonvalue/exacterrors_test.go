//go:build !goexperiment.jsonv2

package jsonvalue_test

// exactErrors says whether encoding/json is the classic implementation, whose
// syntax error messages and offsets Decode reproduces exactly; the jsonv2
// experiment words them differently, so tests then compare verdicts only.
const exactErrors = true
