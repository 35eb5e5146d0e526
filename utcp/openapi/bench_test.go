package openapi_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/exprd/exprd/utcp/openapi"
)

// BenchmarkConvertCatalogs converts the published documents of
// testdata/catalogs, and the petstore, once per iteration.
func BenchmarkConvertCatalogs(b *testing.B) {
	files, _ := filepath.Glob("../testdata/catalogs/*.json")
	files = append(files, "../testdata/openapi/petstore.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(f), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, _, err := openapi.Convert(data, openapi.Options{Manual: "m", SpecURL: "https://spec.example/x"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
