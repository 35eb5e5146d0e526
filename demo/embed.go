// Package demo is what `exprd --demo` ships in its binary: a products
// state that each session starts from, the demo's server-run functions
// (Functions), and, in demo/providers, its UTCP tool providers. The
// clients that talk to it are in examples/.
package demo

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
)

// Products is demo/products.json: twenty products, nothing selected.
//
//go:embed products.json
var Products []byte

// CheapestProducts is the ids of the n lowest-priced products of Products,
// sorted by id: what the clients' tests check a selection against,
// computed from the data rather than taken from the client under test.
func CheapestProducts(n int) ([]string, error) {
	type product struct {
		ID    string  `json:"id"`
		Price float64 `json:"price"`
	}
	var state struct {
		Products struct {
			Items []product `json:"items"`
		} `json:"products"`
	}
	if err := json.Unmarshal(Products, &state); err != nil {
		return nil, err
	}
	items := state.Products.Items
	if len(items) < n {
		return nil, fmt.Errorf("products.json has %d products, fewer than %d", len(items), n)
	}
	slices.SortStableFunc(items, func(a, b product) int { return cmp.Compare(a.Price, b.Price) })
	ids := make([]string, 0, n)
	for _, it := range items[:n] {
		ids = append(ids, it.ID)
	}
	slices.Sort(ids)
	return ids, nil
}
