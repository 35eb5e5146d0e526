package search

import (
	"sync/atomic"
	"testing"

	"github.com/exprd/exprd/utcp/manual"

	"go.uber.org/goleak"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/exprd/exprd/utcp/openapi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tracked is the index a test registry searches with: it records the last
// index the registry derived, so that a test can look inside it.
type tracked struct {
	*Index
	last *atomic.Pointer[Index]
}

func (t tracked) With(removed []string, added []*manual.Tool) utcp.Index {
	next := t.Index.with(removed, added)
	t.last.Store(next)
	return tracked{next, t.last}
}

// testRegistry is a registry with the http transports, the OpenAPI
// converter and a tracked index, and opts; index returns the index it
// holds now.
func testRegistry(tb testing.TB, opts ...utcp.Option) (r *utcp.Registry, index func() *Index) {
	tb.Helper()
	transports, err := httptransport.Transports()
	if err != nil {
		tb.Fatal(err)
	}
	last := &atomic.Pointer[Index]{}
	empty := New()
	last.Store(empty)
	r, err = utcp.New(append([]utcp.Option{utcp.WithTransports(transports), utcp.WithConverter(openapi.Converter{}),
		utcp.WithIndex(tracked{empty, last})}, opts...)...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = r.Close() })
	return r, last.Load
}
