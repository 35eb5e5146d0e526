package toolstore

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// TestRecordBounds: a stored record at MaxRecordBytes is taken and one
// byte past it refused; a record that decompresses to maxRecordJSON is
// read and one byte more is refused, so a record cannot make a replica
// allocate without bound.
func TestRecordBounds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		n    int
		ok   bool
	}{{"at the limit", MaxRecordBytes, true}, {"one past", MaxRecordBytes + 1, false}} {
		err := recordWithin(make([]byte, tt.n))
		var le *utcp.LimitError
		if (err == nil) != tt.ok || (err != nil && (!errors.As(err, &le) || le.What != "manual_bytes")) {
			t.Errorf("stored %s: got %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	for _, tt := range []struct {
		name string
		n    int
		ok   bool
	}{{"at the limit", maxRecordJSON, true}, {"one past", maxRecordJSON + 1, false}} {
		// A JSON record of exactly n bytes: {"writer":"xxx…"}.
		raw := `{"writer":"` + strings.Repeat("x", tt.n-len(`{"writer":""}`)) + `"}`
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(raw))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := decodeRecord(buf.Bytes())
		if (err == nil) != tt.ok {
			t.Errorf("decompressed %s: got %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
