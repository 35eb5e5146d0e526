// Package examples holds the demo's data: a products state that `exprd
// --demo` starts each session from.
package examples

import _ "embed"

// Products is examples/products.json: twenty products, nothing selected.
//
//go:embed products.json
var Products []byte
