package bench

import (
	"encoding/json"
	"strconv"
)

// A workload is one piece of work written once per engine: exprd's step
// (run through evaluator/ as a one-step call that writes its value), and the
// same expression for a bare expr.Run, cel-go and goja. Every engine
// computes the same value from the same state; the tests check that.
type workload struct {
	name  string
	state []byte // the JSON state: {"products": {"items": [...]}}
	expr  string // expr source over scopes.root (exprd and bare expr)
	cel   string // CEL source over scopes.root
	js    string // JavaScript over scopes.root
}

// small is the demo's one-step selection: the ids of the five cheapest of 20
// products (demo/products.json's shape).
func small() workload {
	return workload{
		name:  "small",
		state: products(20),
		expr:  `map(sortBy(scopes.root.products.items, .price)[:5], .id)`,
		cel:   `scopes.root.products.items.sortBy(p, p.price).slice(0, 5).map(p, p.id)`,
		js:    `scopes.root.products.items.slice().sort((a, b) => a.price - b.price).slice(0, 5).map(p => p.id)`,
	}
}

// large is a filter/map step over 10,000 items keeping about a tenth.
func large() workload {
	return workload{
		name:  "large",
		state: products(10_000),
		expr:  `map(filter(scopes.root.products.items, .stock > 0 && .price < 100), ({"id": .id, "total": .price * .stock}))`,
		cel:   `scopes.root.products.items.filter(p, p.stock > 0.0 && p.price < 100.0).map(p, {"id": p.id, "total": p.price * p.stock})`,
		js:    `scopes.root.products.items.filter(p => p.stock > 0 && p.price < 100).map(p => ({id: p.id, total: p.price * p.stock}))`,
	}
}

// products is a products state of n items, about 150 bytes each, with
// distinct prices so that every engine's sort agrees.
func products(n int) []byte {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{
			"id": "p" + strconv.Itoa(i), "name": "Product " + strconv.Itoa(i),
			"price": float64((i*7919)%1000) + float64(i)/float64(n+1), "stock": i % 50,
			"category": []string{"office", "home", "tech"}[i%3], "discontinued": i%7 == 0,
		}
	}
	data, err := json.Marshal(map[string]any{"products": map[string]any{"title": "Products", "items": items}, "selected": map[string]any{}})
	if err != nil {
		panic(err)
	}
	return data
}
