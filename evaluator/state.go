package evaluator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"unicode/utf8"

	"github.com/exprd/exprd/evaluator/jsonvalue"
	"github.com/exprd/exprd/internal/exprbound"
	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/membudget"
)

// State is a session's scopes.root: a JSON object that calls read and write.
// Every change makes a new root that shares what it did not change, so a
// snapshot handed out never changes.
type State struct {
	mu   sync.RWMutex
	root map[string]any
	// size is the root's size in bytes of JSON: exact after Replace, an
	// upper estimate after patches and writes, measured again when the
	// estimate passes maxBytes.
	size     int
	maxBytes int // 0: no limit
	// boxes counts the root's objects and arrays, as size its bytes:
	// exact after Replace, an upper estimate after patches and writes,
	// counted again when the estimate passes MaxStateContainers.
	boxes int
	// mem holds the state's memory in the server's budget (nil: none):
	// its estimate (stateMemory) less base, what the state it was forked
	// from holds of it already.
	mem  *membudget.Reservation
	base int64
	// held bounds the Go memory of root (footprint): exact after
	// Replace, an upper estimate after patches and writes (what they add
	// and the containers they copy, without what they drop), measured
	// again when the budget refuses an estimate a quarter past
	// measuredAt, the estimate last measured: a walk of the whole state
	// is paid for by a quarter of it written since, not by each write the
	// budget refuses.
	held, measuredAt int64
}

// measure is footprint, as charge measures a state (a test counts it).
var measure = footprint

// UseMemory makes the state reserve what it holds from r (a reservation
// of the server's memory budget) from now on: every change reserves its
// growth before it is made, and a change the budget cannot hold is refused
// with a *membudget.ExhaustedError, the state unchanged. What the state
// holds when UseMemory is called is not counted: it is shared with the
// state it was forked from.
func (s *State) UseMemory(r *membudget.Reservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem, s.base = r, s.held
}

// charge reserves the memory of root, estimated at held, without waiting,
// taking first what spare (nil: none) holds for it, and returns what it
// reserved for: held, or what root is measured at when the budget
// refuses held and the measure is lower. Callers hold mu.
func (s *State) charge(root map[string]any, held int64, spare *membudget.Reservation) (int64, error) {
	err := s.mem.TryResizeFrom(spare, held-s.base)
	if err == nil {
		return held, nil
	}
	if held > s.measuredAt+s.measuredAt/4 {
		s.measuredAt = held
		if exact := measure(root); exact < held && s.mem.TryResizeFrom(spare, exact-s.base) == nil {
			s.measuredAt = exact
			return exact, nil
		}
	}
	return 0, err
}

// Bounds of every state besides its bytes: what a state costs in memory
// follows its objects and arrays more than its bytes (`{}` is 2 bytes of
// JSON and about 50 of Go), and reading it recurses as deep as it nests.
const (
	// MaxStateContainers bounds the objects and arrays of a state, or of
	// a patch.
	MaxStateContainers = 1 << 18
	// MaxStateDepth bounds how deep a state or a patch nests.
	MaxStateDepth = 256
)

var stateLimits = jsonvalue.Limits{MaxDepth: MaxStateDepth, MaxContainers: MaxStateContainers}

// StateTooLargeError refuses a change that would make the state larger
// than a limit: its bytes of JSON (What ""), its objects and arrays
// ("containers") or its depth ("depth").
type StateTooLargeError struct {
	What      string
	Size, Max int
}

func (e *StateTooLargeError) Error() string {
	switch e.What {
	case "containers":
		return fmt.Sprintf("the state would hold more than %d objects and arrays", e.Max)
	case "depth":
		return fmt.Sprintf("the state would nest deeper than %d levels", e.Max)
	}
	return fmt.Sprintf("the state would be %d bytes of JSON, over the limit of %d", e.Size, e.Max)
}

// decodeState decodes a state or a patch within the state's bounds: over
// one is a *StateTooLargeError, found before the rest is built.
// It also returns the objects and arrays decoded. JSON must be UTF-8: a
// byte that is not would be written back as \ufffd, six bytes, and the
// state's size, counted in the bytes it came in, would be too small.
// (Through gRPC it cannot happen: a proto string is UTF-8.)
//
// It decodes on a turn of the caller's, if ctx carries turns: a state of
// megabytes takes tens of milliseconds to decode, which would otherwise
// keep a core from every caller (turns.Compute); ctx's end stops it with
// ctx's error.
//
// It also returns what the value holds in Go (footprint).
func decodeState(ctx context.Context, data []byte, what string) (v any, n int, held int64, err error) {
	if !utf8.Valid(data) {
		return nil, 0, 0, fmt.Errorf("%s is not valid JSON: it is not UTF-8", what)
	}
	err = turns.Compute(ctx, membudget.CallerOf(ctx), func(ctx context.Context) error {
		lim := stateLimits
		lim.Yield = func() error { return turns.Yield(ctx) }
		var err error
		if v, n, err = jsonvalue.DecodeLimited(data, lim); err == nil {
			held = footprint(v)
		}
		return err
	})
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, 0, 0, ctxErr
	}
	var le *jsonvalue.LimitError
	if errors.As(err, &le) {
		return nil, 0, 0, &StateTooLargeError{What: le.What, Max: le.Limit}
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s is not valid JSON: %w", what, err)
	}
	return v, n, held, nil
}

// NewState returns an empty state ({}) holding at most maxBytes of JSON (0:
// no limit).
func NewState(maxBytes ...int) *State {
	s := &State{root: map[string]any{}, size: 2, boxes: 1, held: mapCost(0), measuredAt: mapCost(0)}
	if len(maxBytes) > 0 {
		s.maxBytes = maxBytes[0]
	}
	return s
}

// Fork returns a new State holding s's current root, with the limit
// maxBytes (0: none). The two share the root until either changes, which
// copies only what changes.
func (s *State) Fork(maxBytes int) *State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &State{root: s.root, size: s.size, maxBytes: maxBytes, boxes: s.boxes, held: s.held, measuredAt: s.measuredAt}
}

// Size returns the state's size in bytes of JSON (an upper estimate after
// patches and writes).
func (s *State) Size() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.size
}

// fits reports whether a root of about estimate bytes is within the limit,
// measuring root when the estimate is over. Callers hold mu.
func (s *State) fits(root map[string]any, estimate int) (int, error) {
	if s.maxBytes == 0 || estimate <= s.maxBytes {
		return estimate, nil
	}
	exact := jsonSize(root)
	if exact > s.maxBytes {
		return exact, &StateTooLargeError{Size: exact, Max: s.maxBytes}
	}
	return exact, nil
}

// Snapshot returns the current root. Callers must not modify it.
func (s *State) Snapshot() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.root
}

// Replace sets the state to a JSON object. On error the state is unchanged.
func (s *State) Replace(data []byte) error { return s.ReplaceContext(context.Background(), data) }

// ReplaceContext is Replace for a caller's request: the JSON is decoded
// on the caller's turns if ctx carries them, and ctx's end stops it.
func (s *State) ReplaceContext(ctx context.Context, data []byte) error {
	// The new state is held beside the old one until the state's own
	// reservation holds it.
	m, boxes, held, spare, err := s.decodeObject(ctx, data, "state", "state")
	if err != nil {
		return err
	}
	defer spare.Release()
	// Its size is that of the JSON it is written as, which a number can
	// make longer than the bytes it came in (1e20 is 21 digits).
	size := jsonSize(m)
	if s.maxBytes > 0 && size > s.maxBytes {
		return &StateTooLargeError{Size: size, Max: s.maxBytes}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.mem.TryResizeFrom(spare, held); err != nil {
		return err
	}
	s.root, s.size, s.boxes, s.base, s.held, s.measuredAt = m, size, boxes, 0, held, held
	return nil
}

// decodeObject is what Replace and MergePatch first do with data, a JSON
// object (what names it to decodeState, name in the error when it is not
// an object): refuse it past the state's limit before reading it, then
// decode it, what decoding takes reserved apart beforehand in spare (from
// what scanShape counts in data: a state past MaxStateContainers is
// refused there, unread), which the caller releases once the state's own
// reservation holds what it keeps. On error nothing stays reserved.
//
// Counting and decoding take the caller's turns (turns.Compute), not the
// wait for memory between them.
func (s *State) decodeObject(ctx context.Context, data []byte, what, name string) (obj map[string]any, boxes int, held int64, spare *membudget.Reservation, err error) {
	if s.maxBytes > 0 && len(data) > s.maxBytes {
		return nil, 0, 0, nil, &StateTooLargeError{Size: len(data), Max: s.maxBytes}
	}
	var sh shape
	err = turns.Compute(ctx, membudget.CallerOf(ctx), func(ctx context.Context) error {
		var err error
		sh, err = scanShape(data, func() error { return turns.Yield(ctx) })
		return err
	})
	if err != nil {
		return nil, 0, 0, nil, err
	}
	if sh.containers() > MaxStateContainers { // decoding would stop there
		return nil, 0, 0, nil, &StateTooLargeError{What: "containers", Max: MaxStateContainers}
	}
	spare, err = s.mem.Spare(context.Background(), sh.memory())
	if err != nil {
		return nil, 0, 0, nil, err
	}
	v, boxes, held, err := decodeState(ctx, data, what)
	if err != nil {
		spare.Release()
		return nil, 0, 0, nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		spare.Release()
		return nil, 0, 0, nil, fmt.Errorf("%s must be a JSON object, got %s", name, exprbound.Kind(v))
	}
	return obj, boxes, held, spare, nil
}

// MergePatch applies an RFC 7386 JSON merge patch, which must be an object.
// On error the state is unchanged.
func (s *State) MergePatch(data []byte) error { return s.MergePatchContext(context.Background(), data) }

// MergePatchContext is MergePatch for a caller's request, as
// ReplaceContext.
func (s *State) MergePatchContext(ctx context.Context, data []byte) error {
	// The patch, decoded, joins the state: it is held apart while it is
	// merged.
	patch, patchBoxes, patchHeld, spare, err := s.decodeObject(ctx, data, "patch", "a patch of the state")
	if err != nil {
		return err
	}
	defer spare.Release()
	s.mu.Lock()
	defer s.mu.Unlock()
	// The merged state is at most the old one and the patch as written.
	root, size, boxes, err := s.patched(patch, patchBoxes, jsonSize(patch))
	if err != nil {
		return err
	}
	held, err := s.charge(root, s.held+patchHeld+mergeCopies(s.root, patch), spare)
	if err != nil {
		return err
	}
	s.root, s.size, s.boxes, s.held = root, size, boxes, held
	return nil
}

// patched is the root with a decoded merge patch (of patchBoxes objects
// and arrays, patchBytes of JSON) applied, its size and its objects and
// arrays; callers hold mu.
func (s *State) patched(patch map[string]any, patchBoxes, patchBytes int) (map[string]any, int, int, error) {
	root := mergePatch(s.root, patch).(map[string]any)
	size, err := s.fits(root, s.size+patchBytes)
	if err != nil {
		return nil, 0, 0, err
	}
	boxes, err := boxesFit(root, s.boxes+patchBoxes)
	if err != nil {
		return nil, 0, 0, err
	}
	return root, size, boxes, nil
}

// mergePatch is RFC 7386's MergePatch, copying only what the patch changes.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, _ := target.(map[string]any)
	out := maps.Clone(t)
	if out == nil {
		out = make(map[string]any, len(p))
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(t[k], v)
	}
	return out
}

// set writes v, whose JSON is size bytes, at p.
func (s *State) set(p Path, v any, size int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	root, err := p.set(s.root, v)
	if err != nil {
		return err
	}
	total, err := s.fits(root, s.size+size+len(p.text))
	if err != nil {
		return budgetError(BudgetState, "%s", err.Error())
	}
	// The objects the path creates, and the value's own: at most one per
	// two bytes of its JSON, counted only when that bound would not do.
	added := len(p.elems) + size/2
	if s.boxes+added > MaxStateContainers {
		added = len(p.elems) + containers(v, MaxStateContainers)
	}
	boxes, err := boxesFit(root, s.boxes+added)
	if err != nil {
		return budgetError(BudgetState, "%s", err.Error())
	}
	held, err := s.charge(root, s.held+p.copyCost(s.root)+footprint(v), nil)
	if err != nil {
		return budgetError(BudgetState, "%s", err.Error())
	}
	s.root, s.size, s.boxes, s.held = root, total, boxes, held
	return nil
}

// boxesFit is fits for objects and arrays: an estimate within
// MaxStateContainers stands, one over it is counted exactly.
func boxesFit(root map[string]any, estimate int) (int, error) {
	if estimate <= MaxStateContainers {
		return estimate, nil
	}
	if n := containers(root, MaxStateContainers); n <= MaxStateContainers {
		return n, nil
	}
	return 0, &StateTooLargeError{What: "containers", Max: MaxStateContainers}
}

// jsonSize is the size of v's JSON: exact for what normalize produces,
// without building it.
func jsonSize(v any) int {
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		if x {
			return 4
		}
		return 5
	case float64:
		var buf [32]byte
		return len(appendFloat(buf[:0], x))
	case string:
		return stringSize(x)
	case []any:
		n := 2 + max(len(x)-1, 0)
		for _, item := range x {
			n += jsonSize(item)
		}
		return n
	case map[string]any:
		n := 2 + max(len(x)-1, 0)
		for k, item := range x {
			n += stringSize(k) + 1 + jsonSize(item)
		}
		return n
	default:
		return len(appendJSON(nil, v))
	}
}

// stringSize is len(appendString(nil, s)), counted.
func stringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// containers counts v's objects and arrays, stopping once past limit.
func containers(v any, limit int) int {
	n := 0
	var walk func(any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			n++
			for _, e := range t {
				walk(e)
			}
		case []any:
			n++
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return n
}
