package jsonvalue_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/exprd/exprd/evaluator/jsonvalue"
)

// benchDocument builds a UI state snapshot of about 1 MB, shaped like the
// ones clients send: session and view settings around a "products" object
// whose "items" array holds 5,000 product objects with ids, names, prices,
// tag arrays, nested objects, booleans, nulls and strings with escapes.
func benchDocument() []byte {
	var b strings.Builder
	b.WriteString(`{"version":7,"session":{"id":"c0a8012e-5b1f-4c3e-9a7d-2f6e8b9d1a34","user":{"id":90210,` +
		`"name":"Zo\u00eb O'Brien","email":"zoe@example.com","roles":["editor","viewer"],"locale":"fr-FR",` +
		`"lastSeen":"2026-03-14T09:26:53Z"},"expires":null},"ui":{"theme":"dark","sidebar":{"open":true,` +
		`"width":280,"pinned":["inbox","reports","settings"]},"table":{"sort":{"column":"price","desc":false},` +
		`"page":3,"pageSize":50,"columns":["sku","name","price","stock","rating"]},"toast":null},"products":{` +
		`"total":5000,"currency":"EUR","updatedAt":"2026-03-14T09:26:50Z","items":[`)
	tags := []string{"sale", "new", "eco", "bestseller", "limited", "outdoor", "kids", "gift"}
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("Widget %d", i)
		switch i % 4 {
		case 1:
			name += ` \"Pro\"`
		case 2:
			name += ` \u2013 \u00e9dition sp\u00e9ciale`
		case 3:
			name += " – édition 🚀"
		}
		desc := "Sturdy."
		if i%3 == 0 {
			desc = `Two lines:\nwith \/escapes\/ \ud83d\ude00`
		}
		fmt.Fprintf(&b, `{"id":%d,"sku":"SKU-%06d","name":"%s","price":%d.%02d,"discount":%s,`+
			`"tags":["%s","%s"],"size":{"w":%d.5,"h":%d},`+
			`"inStock":%t,"featured":%t,"rating":%d.%d,"desc":"%s"}`,
			100000+i, i, name, 5+i%200, i%100, discount(i),
			tags[i%len(tags)], tags[(i/3)%len(tags)],
			10+i%40, 5+i%20,
			i%7 != 0, i%11 == 0, 1+i%5, i%10, desc)
	}
	b.WriteString(`],"filters":{"priceMin":null,"priceMax":250.5,"tags":[],"inStockOnly":true}}}`)
	return []byte(b.String())
}

func discount(i int) string {
	if i%5 == 0 {
		return fmt.Sprintf("0.%02d", 5+i%30)
	}
	return "null"
}

// TestBenchDocument checks that the benchmark measures what it claims: a
// document of about 1 MB that both decoders read to the same value.
func TestBenchDocument(t *testing.T) {
	data := benchDocument()
	if n := len(data); n < 900_000 || n > 1_200_000 {
		t.Errorf("benchmark document is %d bytes, want about 1 MB", n)
	}
	if testing.Verbose() {
		t.Logf("benchmark document: %d bytes", len(data))
	}
	compare(t, data)
}

// BenchmarkDecode1MB compares Decode with encoding/json.Unmarshal into a
// map[string]any on the same document; compare the two ns/op.
func BenchmarkDecode1MB(b *testing.B) {
	data := benchDocument()
	b.Run("jsonvalue", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := jsonvalue.Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var m map[string]any // fresh each time, or Unmarshal would merge into it
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodePatch compares the two on a small merge patch, the other
// common input, where fixed costs per call matter more than throughput.
func BenchmarkDecodePatch(b *testing.B) {
	data := []byte(`{"products":{"items":[{"id":100042,"price":17.5,"tags":["sale"],"discount":null}]},` +
		`"ui":{"sidebar":{"open":false},"toast":{"text":"Saved \u2713","level":"info"}}}`)
	b.Run("jsonvalue", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := jsonvalue.Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
