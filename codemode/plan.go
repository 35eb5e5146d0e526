package codemode

import (
	"strings"
)

// Plan is what a model makes of a prompt: the tools it declares, the code
// that calls them, and whether the code streams.
type Plan struct {
	Tools  []string `json:"tools"`
	Code   string   `json:"code"`
	Stream bool     `json:"stream"`
}

// CheckPlan checks a plan against the candidates the model was offered:
// declared ⊆ candidates, used ⊆ declared, declared ⊆ used, and stream true
// exactly when the code calls codemode.CallToolStream. The code is parsed
// and checked (not compiled) under the default budgets. A failure is a
// *Error: invalid-plan, or the code's own reason.
func CheckPlan(plan Plan, candidates []string) error {
	b, _ := Budgets{}.withDefaults()
	if err := checkSource(plan.Code, &b); err != nil {
		return err
	}
	a, err := analyze(plan.Code, &b)
	if err != nil {
		return err
	}
	if e := checkPlan(plan, candidates, a); e != nil {
		return e
	}
	return nil
}

func checkPlan(plan Plan, candidates []string, a *Analysis) *Error {
	offered := set(candidates)
	declared := set(plan.Tools)
	var missing []string
	for _, t := range plan.Tools {
		if !offered.has(t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return errorf(InvalidPlan, "the plan declares tools that were not offered: %s", strings.Join(missing, ", "))
	}
	if err := checkTools(a, declared); err != nil {
		e := errorf(InvalidPlan, "the code calls %q, which the plan does not declare (line %d, column %d)", err.Tool, err.Line, err.Column)
		e.Tool, e.Line, e.Column = err.Tool, err.Line, err.Column
		return e
	}
	used := set(a.UsedTools())
	for _, t := range plan.Tools {
		if !used.has(t) && !a.Dynamic {
			return errorf(InvalidPlan, "the plan declares %q, which the code never calls by name", t)
		}
	}
	switch {
	case plan.Stream && !a.Streams:
		return errorf(InvalidPlan, "the plan says stream, but the code never calls codemode.CallToolStream")
	case !plan.Stream && a.Streams:
		return errorf(InvalidPlan, "the code calls codemode.CallToolStream, but the plan does not say stream")
	}
	return nil
}
