package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A tally counts what one load's requests got back. Every request ends in
// exactly one of: a typed answer (the kind wanted, or another: "wrong
// kind"), an untyped error (not a gRPC status, or UNKNOWN), or no answer by
// its deadline. The last two fail the run.
type tally struct {
	mu         sync.Mutex
	requests   int
	kinds      map[string]int
	wrongKind  int
	untyped    int
	late       int
	ownExpired int // a deliberately short client deadline ran out (case 4)
	unread     int // sent, and by design never read back (case 6)
	lat        []time.Duration
	notes      []string
	samples    map[string]string // the first message of each kind
	// legit counts the requests of well-behaved clients inside a case
	// (case 8d's legitimate caller): each must be answered right, as the
	// steady client's are. nil in a tally that is itself legit.
	legit *tally
}

const maxNotes = 4

func newTally() *tally {
	t := newLegitTally()
	t.legit = newLegitTally()
	return t
}

func newLegitTally() *tally { return &tally{kinds: map[string]int{}, samples: map[string]string{}} }

// wrong is how many of t's requests were not answered as wanted: for the
// steady client and legitimate callers, each one a failure.
func (t *tally) wrong() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wrongKind + t.untyped + t.late
}

// answer records a typed answer of kind, wanted or not, after d; msg is
// what it said (kept once a kind, for the report).
func (t *tally) answer(kind, msg string, wanted bool, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	t.kinds[kind]++
	if _, ok := t.samples[kind]; !ok && msg != "" {
		t.samples[kind] = msg
	}
	t.lat = append(t.lat, d)
	if !wanted {
		t.wrongKind++
		t.note("wrong kind: " + kind)
	}
}

// rpcError records a request that ended in err after d. A DEADLINE_EXCEEDED
// is the client's deadline run out, not as wanted; with shortDeadline the
// client chose a deadline too short for its own upload and it is counted
// apart.
func (t *tally) rpcError(err error, wanted func(codes.Code) bool, shortDeadline bool, d time.Duration) {
	code, typed := statusCode(err)
	switch {
	case !typed:
		t.untypedError(err)
	case code == codes.DeadlineExceeded && shortDeadline:
		t.mu.Lock()
		t.requests++
		t.ownExpired++
		t.kinds["own 100 ms deadline ran out"]++
		t.mu.Unlock()
	case code == codes.DeadlineExceeded:
		// The client's own deadline ran out, and grpc-go ended the call
		// then, whatever exprd was doing: a typed end, by the deadline.
		// Whether exprd went on working past it is what the CPU after
		// the phase shows.
		t.answer("the client's deadline ran out", err.Error(), false, d)
	default:
		st, _ := status.FromError(err)
		kind := "grpc " + code.String()
		if subj := statusSubjects(st); len(subj) > 0 {
			kind += " (" + strings.Join(subj, ", ") + ")"
		}
		t.answer(kind, st.Message(), wanted != nil && wanted(code), d)
	}
}

func (t *tally) untypedError(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	t.untyped++
	t.kinds["untyped error"]++
	t.note("untyped: " + err.Error())
}

// retried counts a request made again after err, a RESOURCE_EXHAUSTED
// refusal, as a kind of its own (with the refusal's subjects): not a
// request.
func (t *tally) retried(err error) {
	kind := "(made again after a RESOURCE_EXHAUSTED"
	if st, ok := status.FromError(err); ok {
		if subj := statusSubjects(st); len(subj) > 0 {
			kind += " (" + strings.Join(subj, ", ") + ")"
		}
	}
	kind += ")"
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kinds[kind]++
	if _, ok := t.samples[kind]; !ok {
		t.samples[kind] = status.Convert(err).Message()
	}
}

// noAnswer records a request that got nothing by its deadline.
func (t *tally) noAnswer(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	t.late++
	t.kinds["no answer by the deadline"]++
	t.note("no answer: " + what)
}

// sent records a request that is never read back by design (case 6).
func (t *tally) sent(kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	t.unread++
	t.kinds[kind]++
}

// note keeps the first few distinct unwanted outcomes.
func (t *tally) note(s string) {
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if len(t.notes) < maxNotes && !slices.Contains(t.notes, s) {
		t.notes = append(t.notes, s)
	}
}

// statusSubjects are the subjects of a status's QuotaFailure, if any.
func statusSubjects(st *status.Status) []string {
	var out []string
	for _, d := range st.Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range q.GetViolations() {
				out = append(out, v.GetSubject())
			}
		}
	}
	return out
}

// statusCode is err's gRPC code, and whether err is typed: a status other
// than UNKNOWN. A cancel of our own making is typed (CANCELED).
func statusCode(err error) (codes.Code, bool) {
	if errors.Is(err, context.Canceled) {
		return codes.Canceled, true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded, true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.Unknown {
		return codes.Unknown, false
	}
	return st.Code(), true
}

// merge adds o's counts to t's (the mix's row sums its loads), and o's
// legitimate requests to t's.
func (t *tally) merge(o *tally) {
	if t.legit != nil && o.legit != nil {
		t.legit.merge(o.legit)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests += o.requests
	t.wrongKind += o.wrongKind
	t.untyped += o.untyped
	t.late += o.late
	t.ownExpired += o.ownExpired
	t.unread += o.unread
	t.lat = append(t.lat, o.lat...)
	for k, n := range o.kinds {
		t.kinds[k] += n
	}
	for k, m := range o.samples {
		if _, ok := t.samples[k]; !ok {
			t.samples[k] = m
		}
	}
	for _, n := range o.notes {
		t.note(n)
	}
}

// kindsString lists the kinds by count, largest first.
func (t *tally) kindsString() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := slices.Collect(maps.Keys(t.kinds))
	slices.SortFunc(keys, func(a, b string) int {
		if t.kinds[a] != t.kinds[b] {
			return t.kinds[b] - t.kinds[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, t.kinds[k]))
	}
	return strings.Join(parts, "; ")
}

// percentile is the p-th percentile (0–100) of ds, 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// refusedPause is how long a hostile client's loop waits after a call
// refused UNAVAILABLE: its connection was refused (exprd's connection
// limits close it at accept) and gRPC fails the next calls at once
// without reaching exprd, so a loop that did not wait would measure the
// harness spinning, taking the cores exprd and the steady client share.
const refusedPause = 10 * time.Millisecond

// pauseIfRefused waits refusedPause after an UNAVAILABLE.
func pauseIfRefused(err error) {
	if code, _ := statusCode(err); code == codes.Unavailable {
		time.Sleep(refusedPause)
	}
}
