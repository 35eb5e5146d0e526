// Package examples holds the demo: a products state that `exprd --demo`
// starts each session from, the demo's server-run functions (Functions),
// and, in examples/providers, its UTCP tool providers.
package examples

import _ "embed"

// Products is examples/products.json: twenty products, nothing selected.
//
//go:embed products.json
var Products []byte
