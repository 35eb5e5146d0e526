package exprbound

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
)

// AllocName is the function the sandbox calls on the value of every
// operation that builds one (a string, an array, a map: the builtins that
// build, + of strings, a range, an array or map literal): the caller binds
// it in the environment as func(any) any, bound to the run's [Meter]
// ([Meter.Alloc]), and it returns the value it was given. expr's own memory
// budget counts the items of the arrays and maps it makes, not bytes, and
// not the strings: `map(1..20000, repeat("x", 100000))` is 20,000 items
// and two gigabytes.
const AllocName = ReservedPrefix + "alloc"

// MeterName is the run's [Meter] itself in the environment (bind it as
// a *Meter), passed to the operations that charge their working memory
// before they run: uniq's buckets, a pattern compiled at run time.
const MeterName = ReservedPrefix + "meter"

// DefaultAllocAllowance is what a run may allocate before its meter
// reserves from the server's memory budget: most runs stay under it and
// reserve nothing.
const DefaultAllocAllowance = 256 << 10

// Meter is one run's byte account: every value an operation builds is
// charged its [Size] as it is made, host-function answers and tool results
// as they arrive ([Meter.Charge]). The count only grows (it is what the run
// allocated, not what it still holds). Past Max the run stops with Over's
// error; past Allowance each further byte is reserved through Reserve
// first, so that what runs allocate at once is within the server's budget.
// Only the run's goroutine uses a Meter.
type Meter struct {
	// Max bounds the bytes of one run.
	Max int64
	// Allowance is what is allocated before Reserve is asked; 0:
	// DefaultAllocAllowance.
	Allowance int64
	// Reserve grows the run's reservation to n bytes in all, or fails
	// (the budget is spent); nil: nothing is reserved.
	Reserve func(n int64) error
	// Over is the error of a run past Max, given what it would have
	// allocated.
	Over func(used, max int64) error

	used     int64
	reserved int64 // what Reserve holds
}

// reserveStep is how much a Meter reserves at a time past its allowance:
// one reservation per megabyte, not per value.
const reserveStep = 1 << 20

// Charge adds n bytes to the account: an error past Max, or when the
// server's budget cannot hold them.
func (m *Meter) Charge(n int64) error {
	if n <= 0 {
		return nil
	}
	m.used += n
	if m.used > m.Max {
		return m.Over(m.used, m.Max)
	}
	if m.Reserve == nil {
		return nil
	}
	allowance := m.Allowance
	if allowance == 0 {
		allowance = DefaultAllocAllowance
	}
	if need := m.used - allowance; need > m.reserved {
		want := min(need+reserveStep, max(m.Max-allowance, need))
		if err := m.Reserve(want); err != nil {
			return err
		}
		m.reserved = want
	}
	return nil
}

// Alloc charges v's size and returns v; it panics with Charge's error,
// which the VM recovers and returns. Bind it as AllocName.
func (m *Meter) Alloc(v any) any {
	if err := m.Charge(Size(v)); err != nil {
		panic(err)
	}
	return v
}

// AllocDeep is Alloc for a value whose parts are new too (fromJSON's,
// toPairs' and groupBy's): its containers and strings down to a few
// levels.
func (m *Meter) AllocDeep(v any) any {
	if err := m.Charge(deepSize(v, deepLevels)); err != nil {
		panic(err)
	}
	return v
}

// chargeFrom charges n bytes to the meter m, an environment's MeterName
// (nil when the caller bound none), panicking with the error.
func chargeFrom(m any, n int64) {
	if mt, ok := m.(*Meter); ok && mt != nil {
		if err := mt.Charge(n); err != nil {
			panic(err)
		}
	}
}

// meterRef is a read of MeterName, for an operation's last argument.
func meterRef(loc file.Location) ast.Node {
	return typed(&ast.IdentifierNode{Value: MeterName}, anyType, loc)
}

// Used is what the run allocated so far.
func (m *Meter) Used() int64 { return m.used }

// Reset empties the account (for a pooled run); the caller releases what
// Reserve holds.
func (m *Meter) Reset() { *m = Meter{} }

// The sizes Size counts, as Go lays values out on amd64.
const (
	sliceHeader  = 24
	stringHeader = 16
	ifaceSize    = 16
	mapHeader    = 48
	mapEntry     = 40 // a string key and an interface value, at the swiss table's load
)

// Size is what a value an operation just built newly holds, in bytes: a
// string's bytes, an array's or a map's slots. Its items were charged when
// they were built, or are the state's or an input's, already held.
func Size(v any) int64 {
	switch x := v.(type) {
	case nil, bool, int, int64, float64:
		return 0
	case string:
		return stringHeader + int64(len(x))
	case []any:
		return sliceHeader + ifaceSize*int64(len(x))
	case map[string]any:
		return mapHeader + mapEntry*int64(len(x))
	case []int:
		return sliceHeader + 8*int64(len(x))
	case []string:
		return sliceHeader + stringHeader*int64(len(x))
	case []float64:
		return sliceHeader + 8*int64(len(x))
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Slice, reflect.Array:
		return sliceHeader + int64(r.Type().Elem().Size())*int64(r.Len())
	case reflect.Map:
		t := r.Type()
		return mapHeader + int64(t.Key().Size()+t.Elem().Size()+8)*int64(r.Len())
	case reflect.String:
		return stringHeader + int64(r.Len())
	}
	return 0
}

// deepLevels is how far AllocDeep looks: fromJSON's value is new all the
// way down, but toPairs' pairs and groupBy's groups hold items that are
// not, and a value of shared parts may be far larger walked than held.
const deepLevels = 3

func deepSize(v any, levels int) int64 {
	n := Size(v)
	if levels == 0 {
		return n
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			n += deepSize(e, levels-1)
		}
	case map[string]any:
		for k, e := range x {
			n += int64(len(k)) + deepSize(e, levels-1)
		}
	}
	return n
}

// Alarm is the flag a run's ticks read: it rings when the run's context
// ends or its time budget passes, so that the next iteration stops the
// run, whatever an iteration costs, without reading the clock at every
// one. The flag may ring late or early (a timer that fired as it was
// reset): a tick that sees it confirms with the clock and the context
// before it stops the run, and rearms it when the run may go on.
type Alarm struct {
	rung      atomic.Bool
	timer     *time.Timer
	stopWatch func() bool
}

// Watch rings the alarm when ctx ends, until Release.
func (a *Alarm) Watch(ctx context.Context) {
	if a.stopWatch != nil {
		a.stopWatch()
	}
	a.stopWatch = context.AfterFunc(ctx, a.ring)
}

func (a *Alarm) ring() { a.rung.Store(true) }

// Arm rings the alarm in d (at once when d <= 0), replacing an earlier
// Arm; Disarm cancels it.
func (a *Alarm) Arm(d time.Duration) {
	if d <= 0 {
		a.ring()
		return
	}
	if a.timer == nil {
		a.timer = time.AfterFunc(d, a.ring)
		return
	}
	a.timer.Reset(d)
}

// Disarm cancels Arm's timer (the context still rings it).
func (a *Alarm) Disarm() {
	if a.timer != nil {
		a.timer.Stop()
	}
}

// Rung reports whether the alarm rang since it was last armed.
func (a *Alarm) Rung() bool { return a.rung.Load() }

// Quiet clears the flag, for a tick that found the run may go on (the
// caller arms it again for what is left of the budget), and rings it again
// at once if ctx ended meanwhile.
func (a *Alarm) Quiet(ctx context.Context) {
	a.rung.Store(false)
	if ctx.Err() != nil {
		a.ring()
	}
}

// Release stops watching the context and the timer, for a pooled run.
func (a *Alarm) Release() {
	a.Disarm()
	if a.stopWatch != nil {
		a.stopWatch()
		a.stopWatch = nil
	}
	a.rung.Store(false)
}

// AllocDeepName is the deep form of AllocName, for a value whose parts
// are new too, bound as func(any) any to [Meter.AllocDeep].
const AllocDeepName = ReservedPrefix + "allocDeep"

// The builtins whose value is built anew: "shallow" when its items are
// the input's (map's and filter's arrays, a string's copy), "deep" when its
// parts are new too. trim, take and the slices share their input's memory;
// the others return a number, a bool or an item.
var allocBuiltins = map[string]string{
	"filter": AllocName, "map": AllocName, "sortBy": AllocName, "sort": AllocName,
	"string": AllocName, "upper": AllocName, "lower": AllocName, "split": AllocName,
	"splitAfter": AllocName, "replace": AllocName, "repeat": AllocName, "join": AllocName,
	"toJSON": AllocName, "keys": AllocName, "values": AllocName, "fromPairs": AllocName,
	"reverse": AllocName, "uniq": AllocName, "concat": AllocName, "flatten": AllocName,
	"fromJSON": AllocDeepName, "toPairs": AllocDeepName, "groupBy": AllocDeepName,
}

// allocates names the function a node's value is charged by (AllocName or
// AllocDeepName), or "" when the node builds nothing: builtins that build,
// + of strings (or of values known only at run time), a range, an array or
// a map literal.
func allocates(n ast.Node) string {
	switch n := n.(type) {
	case *ast.BuiltinNode:
		return allocBuiltins[n.Name]
	case *ast.BinaryNode:
		if n.Operator == ".." {
			return AllocName
		}
		if k := n.Type().Kind(); n.Operator == "+" && (k == reflect.String || k == reflect.Interface) {
			return AllocName
		}
	case *ast.ArrayNode, *ast.MapNode:
		return AllocName
	}
	return ""
}

var allocFuncType = reflect.TypeOf(func(any) any { return nil })

// wrapAlloc replaces node with a call of the meter's function name on it.
func wrapAlloc(node *ast.Node, name string) {
	inner := *node
	loc := inner.Location()
	callee := typed(&ast.IdentifierNode{Value: name}, allocFuncType, loc)
	call := typed(&ast.CallNode{Callee: callee, Arguments: []ast.Node{inner}}, inner.Type(), loc)
	*node = call
}
