package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/membudget"
)

// overloadConfig is the overload manager's flags: the backstop that keeps
// the heap under a line above the memory budget (internal/overload).
type overloadConfig struct {
	on       bool
	line     int64 // 0: overload.LineFor the memory budget
	refuse   float64
	shed     float64
	interval time.Duration
}

func (c *overloadConfig) flags(fs *flag.FlagSet) {
	fs.BoolVar(&c.on, "overload", true, "watch the heap (what the last GC found live, plus goroutine stacks) and, as it nears its line, refuse new RPCs, then cancel the ones holding the most (RESOURCE_EXHAUSTED, OVERLOADED)")
	fs.Int64Var(&c.line, "overload-line", 0, "bytes the heap must stay under (0: the memory budget and a quarter more)")
	fs.Float64Var(&c.refuse, "overload-refuse", overload.DefaultRefuse, "part of the line past which new RPCs are refused, in (0, 1]")
	fs.Float64Var(&c.shed, "overload-shed", overload.DefaultShed, "part of the line past which RPCs in flight are cancelled, one each interval, in (0, 1] and at least --overload-refuse")
	fs.DurationVar(&c.interval, "overload-interval", overload.DefaultInterval, "how often the heap is read")
}

func (c overloadConfig) validate() error {
	var errs []error
	if c.line < 0 {
		errs = append(errs, fmt.Errorf("overload-line: %d, want 0 (the memory budget and a quarter) or more", c.line))
	}
	if !(c.refuse > 0 && c.refuse <= 1) || !(c.shed > 0 && c.shed <= 1) || c.refuse > c.shed {
		errs = append(errs, fmt.Errorf("overload-refuse %v, overload-shed %v: want each in (0, 1], refuse at most shed", c.refuse, c.shed))
	}
	if c.interval <= 0 {
		errs = append(errs, fmt.Errorf("overload-interval: %v, want a positive duration", c.interval))
	}
	return errors.Join(errs...)
}

// lineFor is the overload line for a memory budget of budget bytes under
// a soft memory limit of soft (0: none), and what it comes from: the flag,
// else the budget and a quarter, but no more than 90% of the soft limit
// (overload.LineUnder).
func (c overloadConfig) lineFor(budget, soft int64) (int64, string) {
	if c.line > 0 {
		return c.line, "--overload-line"
	}
	line := overload.LineFor(budget)
	if under := overload.LineUnder(line, soft); under < line {
		return under, "90% of the runtime's soft memory limit, under the memory budget and a quarter"
	}
	return line, "the memory budget and a quarter"
}

// manager is the overload manager for the memory budget, which it
// restricts while it refuses, under a soft memory limit of soft (0: none);
// nil with --overload=false. The caller runs it.
func (c overloadConfig) manager(budget *membudget.Budget, soft int64, log *slog.Logger) (*overload.Manager, error) {
	if !c.on {
		log.Info("overload manager off: nothing keeps the heap under a line")
		return nil, nil
	}
	line, from := c.lineFor(budget.Limit(), soft)
	m, err := overload.New(overload.Config{Line: line, Refuse: c.refuse, Shed: c.shed, Interval: c.interval, Logger: log, Budget: budget})
	if err != nil {
		return nil, err
	}
	st := m.Stats()
	log.Info("overload manager", "line_bytes", st.Line, "from", from, "refuse_at_bytes", st.RefuseAt, "shed_at_bytes", st.ShedAt, "interval", c.interval.String())
	return m, nil
}
