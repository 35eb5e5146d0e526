//go:build goexperiment.jsonv2

package jsonvalue_test

// exactErrors: see exacterrors_test.go.
const exactErrors = false
