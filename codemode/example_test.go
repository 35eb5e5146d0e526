package codemode_test

import (
	"context"
	"fmt"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// A program that chains two tools of the demo's math provider.
func ExampleRuntime_Run() {
	m, err := providers.StartMath()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")))
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	if _, err := reg.Register(context.Background(), "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		panic(err)
	}
	rt, err := codemode.New(reg)
	if err != nil {
		panic(err)
	}
	res, err := rt.Run(context.Background(), `
let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
let sum = codemode.Get(r1, "result");
codemode.CallTool("math.multiply", {"a": sum, "b": 3})`, codemode.RunOptions{Tools: []string{"math.add", "math.multiply"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.ValueJSON))
	for _, c := range res.Trace {
		fmt.Println(c.Tool, c.Outcome)
	}
	// Output:
	// {"result":36}
	// math.add ok
	// math.multiply ok
}
