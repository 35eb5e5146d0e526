package evaltest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/exprd/exprd/evaluator"
)

// Check compares what a run of c produced with what c expects. Writes,
// client calls and the state after are compared only when c gives them;
// values are compared as JSON. The error lists every difference as "got X,
// want Y".
func Check(c Case, a evaluator.Answer, writes []evaluator.Write, calls []ClientCall, stateAfter map[string]any) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	got := a.JSON()
	switch {
	case c.Want.Answer != nil:
		if !jsonEqual(got, c.Want.Answer) {
			fail("answer: got %s, want %s", short(got), short(compact(c.Want.Answer)))
		}
	case a.Err == nil:
		fail("answer: got %s, want an error %q", short(got), c.Want.Reason)
	case a.Err.Reason != c.Want.Reason:
		fail("answer: got reason %q (%s), want %q", a.Err.Reason, a.Err.Message, c.Want.Reason)
	case !strings.Contains(a.Err.Message, c.Want.MessageContains):
		fail("answer: got message %q, want it to contain %q", a.Err.Message, c.Want.MessageContains)
	}
	if c.Writes != nil {
		if len(writes) != len(c.Writes) {
			fail("writes: got %d (%s), want %d (%s)", len(writes), short([]byte(renderWrites(writes))), len(c.Writes), short(mustJSON(c.Writes)))
		} else {
			for i, w := range writes {
				want := c.Writes[i]
				value := writeJSON(w)
				if w.Step != want.Step || w.Path != want.Path || !jsonEqual(value, want.Value) {
					fail("write %d: got step %d %s = %s, want step %d %s = %s", i, w.Step, w.Path, short(value), want.Step, want.Path, short(compact(want.Value)))
				}
			}
		}
	}
	if c.ClientCalls != nil {
		same := len(calls) == len(c.ClientCalls)
		for i := 0; same && i < len(calls); i++ {
			same = jsonEqual(mustJSON(calls[i]), mustJSON(c.ClientCalls[i]))
		}
		if !same {
			fail("client calls: got %s, want %s", short(mustJSON(calls)), short(mustJSON(c.ClientCalls)))
		}
	}
	if c.StateAfter != nil {
		if g := mustJSON(stateAfter); stateAfter == nil || !jsonEqual(g, c.StateAfter) {
			fail("state after: got %s, want %s", short(g), short(compact(c.StateAfter)))
		}
	}
	return errors.Join(errs...)
}

// ParseAnswer turns an answer's JSON, in the shapes [evaluator.Answer.JSON]
// renders, back into an [evaluator.Answer], for Check.
func ParseAnswer(data []byte) (evaluator.Answer, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return evaluator.Answer{}, fmt.Errorf("answer %s: %w", data, err)
	}
	if len(m) > 1 {
		return evaluator.Answer{}, fmt.Errorf("answer %s: want at most one key", data)
	}
	var a evaluator.Answer
	for k, v := range m {
		switch k {
		case "value":
			a.ValueJSON = v
		case "declined":
			if err := json.Unmarshal(v, &a.Declined); err != nil || !a.Declined {
				return a, fmt.Errorf("answer %s: declined must be true", data)
			}
		case "error":
			var e struct {
				Reason  evaluator.Reason `json:"reason"`
				Message string           `json:"message"`
			}
			if err := json.Unmarshal(v, &e); err != nil {
				return a, fmt.Errorf("answer %s: %w", data, err)
			}
			a.Err = &evaluator.Error{Reason: e.Reason, Message: e.Message, Step: -1}
		default:
			return a, fmt.Errorf("answer %s: unknown key %q", data, k)
		}
	}
	return a, nil
}

func writeJSON(w evaluator.Write) []byte {
	if w.ValueJSON != nil {
		return w.ValueJSON
	}
	return mustJSON(w.Value)
}

func renderWrites(ws []evaluator.Write) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, w := range ws {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "step %d %s = %s", w.Step, w.Path, writeJSON(w))
	}
	b.WriteByte(']')
	return b.String()
}

// jsonEqual reports whether a and b hold equal JSON values.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%q", fmt.Sprint(v)))
	}
	return b
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// shortLen bounds a value shown in a difference: a whole state helps no one.
const shortLen = 400

func short(b []byte) string {
	if len(b) <= shortLen {
		return string(b)
	}
	return fmt.Sprintf("%s… (%d bytes)", b[:shortLen], len(b))
}

// timeBudgetText is in the message of every time-budget error, and in the
// message_contains of every case that expects one.
const timeBudgetText = "time budget"

// OverTime reports whether a ran out of the time budget where c expects
// something else. Over the wall clock (a tool without WithClock) a loaded
// machine may spend any case's time budget; a caller may run such a case
// again.
func OverTime(c Case, a evaluator.Answer) bool {
	expected := c.Want.Reason == evaluator.BudgetExceeded && strings.Contains(c.Want.MessageContains, timeBudgetText)
	return !expected && a.Err != nil && a.Err.Reason == evaluator.BudgetExceeded &&
		strings.Contains(a.Err.Message, timeBudgetText)
}
