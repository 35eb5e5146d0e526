package agent

import "slices"

// StopCondition decides, after each step that made tool calls (its results
// included), whether the turn ends there.
type StopCondition interface {
	Stop(steps []Step) bool
}

// StopFunc adapts a function to [StopCondition].
type StopFunc func(steps []Step) bool

// Stop calls f.
func (f StopFunc) Stop(steps []Step) bool { return f(steps) }

// MaxSteps stops once the turn has made n steps.
func MaxSteps(n int) StopCondition {
	return StopFunc(func(steps []Step) bool { return len(steps) >= n })
}

// HasToolCall stops after a step that called one of the named tools; with
// no names, after a step that called any tool.
func HasToolCall(names ...string) StopCondition {
	return StopFunc(func(steps []Step) bool {
		if len(steps) == 0 {
			return false
		}
		for _, c := range steps[len(steps)-1].ToolCalls {
			if len(names) == 0 || slices.Contains(names, c.Name) {
				return true
			}
		}
		return false
	})
}

// And stops when every condition does (And() always stops). A nil
// condition never stops.
func And(c ...StopCondition) StopCondition {
	return StopFunc(func(steps []Step) bool {
		for _, s := range c {
			if s == nil || !s.Stop(steps) {
				return false
			}
		}
		return true
	})
}

// Or stops when any condition does (Or() never stops).
func Or(c ...StopCondition) StopCondition {
	return StopFunc(func(steps []Step) bool {
		for _, s := range c {
			if s != nil && s.Stop(steps) {
				return true
			}
		}
		return false
	})
}

// Not stops when c does not (a nil c: always).
func Not(c StopCondition) StopCondition {
	return StopFunc(func(steps []Step) bool { return c == nil || !c.Stop(steps) })
}
