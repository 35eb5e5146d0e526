package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/testkit/benchpair"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// BenchmarkChain compares a three-call chain run by codemode against the
// loopback math provider with the same three calls made directly with
// net/http (goal: codemode ≤ 1.15× direct; compile cached).
func BenchmarkChain(b *testing.B) {
	m, err := providers.StartMath()
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")))
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.Register(context.Background(), "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		b.Fatal(err)
	}
	rt, err := codemode.New(reg)
	if err != nil {
		b.Fatal(err)
	}
	code := `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
let r2 = codemode.CallTool("math.multiply", {"a": codemode.Get(r1, "result"), "b": 3});
codemode.CallTool("math.subtract", {"a": codemode.Get(r2, "result"), "b": 1})`
	opts := codemode.RunOptions{Tools: []string{"math.add", "math.multiply", "math.subtract"}}
	viaCodemode := func(b *testing.B) {
		res, err := rt.Run(context.Background(), code, opts)
		if err != nil || string(res.ValueJSON) != `{"result":35}` {
			b.Fatalf("got %s, %v", res.ValueJSON, err)
		}
	}
	b.Run("codemode", func(b *testing.B) {
		for b.Loop() {
			viaCodemode(b)
		}
	})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	call := func(op string, a, b float64) (float64, error) {
		resp, err := hc.Get(fmt.Sprintf("%s/math/%s?a=%v&b=%v", m.URL(), op, a, b))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var out struct{ Result float64 }
		return out.Result, json.NewDecoder(resp.Body).Decode(&out)
	}
	direct := func(b *testing.B) {
		r1, err := call("add", 5, 7)
		if err == nil {
			r1, err = call("multiply", r1, 3)
		}
		if err == nil {
			r1, err = call("subtract", r1, 1)
		}
		if err != nil || r1 != 35 {
			b.Fatalf("got %v, %v", r1, err)
		}
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			direct(b)
		}
	})
	// The two in each iteration: "ratio" is codemode/direct.
	b.Run("interleaved", func(b *testing.B) { benchpair.Interleave(b, viaCodemode, direct) })
}
