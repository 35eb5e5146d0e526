package codemode_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// FuzzCheck: plan and code checking never panic, and every error is a
// *codemode.Error with a reason from the closed set.
func FuzzCheck(f *testing.F) {
	for _, c := range loadChecks(f) {
		f.Add(c.Code, "math.add", false)
	}
	f.Add(chain.Code, "math.add math.multiply", false)
	f.Add(`codemode.CallToolStream("local.ticks", {})`, "local.ticks", true)
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")))
	if err != nil {
		f.Fatal(err)
	}
	defer reg.Close()
	rt, err := codemode.New(reg)
	if err != nil {
		f.Fatal(err)
	}
	candidates := []string{"math.add", "math.multiply", "local.ticks"}
	f.Fuzz(func(t *testing.T, code, tools string, stream bool) {
		plan := codemode.Plan{Tools: strings.Fields(tools), Code: code, Stream: stream}
		for _, err := range []error{
			codemode.CheckPlan(plan, candidates),
			func() error { _, err := rt.Check(code, plan.Tools, codemode.Budgets{}); return err }(),
		} {
			if err == nil {
				continue
			}
			var ce *codemode.Error
			if !errors.As(err, &ce) || !slices.Contains(codemode.Reasons, ce.Reason) {
				t.Fatalf("%q: got %v (%T), want a *codemode.Error with a known reason", code, err, err)
			}
		}
	})
}
