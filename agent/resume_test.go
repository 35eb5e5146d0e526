package agent_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
)

// journal records what a turn's events tell, as a replica records a turn
// to be resumed elsewhere, and folds a prefix of it into a Resume.
type journal struct {
	mu      sync.Mutex
	entries []entry
}

type entry struct {
	replied   *agent.Reply
	executing string
	result    *struct {
		id string
		r  agent.Result
	}
	grew     []model.Message
	finished *agent.Step
}

func (j *journal) add(e entry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, e)
}

func (j *journal) events() agent.Events {
	return agent.Events{
		Replied: func(_ int, r agent.Reply) { j.add(entry{replied: &r}) },
		ToolResult: func(_ int, c agent.ToolCall, r agent.Result) {
			j.add(entry{result: &struct {
				id string
				r  agent.Result
			}{c.ID, r}})
		},
		HistoryGrew:   func(_ int, msgs []model.Message) { j.add(entry{grew: msgs}) },
		CallExecuting: func(_ int, c agent.ToolCall) { j.add(entry{executing: c.ID}) },
		StepFinished:  func(s agent.Step) { j.add(entry{finished: &s}) },
	}
}

// resume folds the first n entries: the history after the finished
// steps, and the reply of the step under way with its results.
func (j *journal) resume(initial []model.Message, n int) ([]model.Message, *agent.Resume) {
	msgs := slices.Clone(initial)
	r := &agent.Resume{}
	for _, e := range j.entries[:n] {
		switch {
		case e.replied != nil:
			rep := *e.replied
			rep.Results, rep.Executing = map[string]agent.Result{}, map[string]bool{}
			r.Reply = &rep
		case e.executing != "":
			r.Reply.Executing[e.executing] = true
		case e.result != nil:
			r.Reply.Results[e.result.id] = e.result.r
		case e.grew != nil:
			msgs = append(msgs, e.grew...)
		case e.finished != nil:
			r.Steps = append(r.Steps, *e.finished)
			r.Reply = nil
		}
	}
	return msgs, r
}

// A turn resumed from any point of what its events recorded ends as the
// uninterrupted turn does: the model is not asked again for a step whose
// answer was recorded, a recorded result is not run again, an idempotent
// call whose result was not recorded runs again, and any other such call
// is answered Interrupted.
func TestResumeFromEveryPoint(t *testing.T) {
	t.Parallel()
	step0 := scripted.Turn{ToolCalls: []scripted.ToolCall{callID("c1", "charge", `{"q":"a"}`), callID("c2", "lookup", `{"q":"b"}`)}}
	step1 := scripted.Turn{Text: "done"}
	initial := []model.Message{model.User("question")}
	tools := func(charge, lookup *counting) []agent.Tool {
		return []agent.Tool{
			{Name: "charge", Parameters: json.RawMessage(objectSchema), Exec: charge},
			{Name: "lookup", Parameters: json.RawMessage(objectSchema), Exec: lookup, Idempotent: true},
		}
	}

	var j journal
	full := serve(t, step0, step1)
	cfg := config(t, full, tools(&counting{reply: `{"charged":1}`}, &counting{reply: `{"found":2}`})...)
	cfg.Events = j.events()
	cfg.Parallelism = 1 // the calls run, and are recorded, in order
	want := run(t, cfg)
	// replied, two calls executing then their results, grew, finished;
	// then step 1's replied, grew, finished
	if len(j.entries) != 10 {
		t.Fatalf("journal of %d entries: %+v", len(j.entries), j.entries)
	}
	wantHistory := toolMessages(t, full, 1)

	for _, tc := range []struct {
		name          string
		cut           int // entries recorded when the turn stopped
		turns         []scripted.Turn
		charges, look int    // how many times each tool runs on resume
		interrupted   string // the call answered Interrupted
	}{
		{"before the model answered", 0, []scripted.Turn{step0, step1}, 1, 1, ""},
		{"its answer recorded, no call begun", 1, []scripted.Turn{step1}, 1, 1, ""},
		{"charge executing, no result", 2, []scripted.Turn{step1}, 0, 1, "c1"},
		{"charge's result recorded", 3, []scripted.Turn{step1}, 0, 1, ""},
		{"lookup executing, no result", 4, []scripted.Turn{step1}, 0, 1, ""},
		{"the step finished", 7, []scripted.Turn{step1}, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charge, lookup := &counting{reply: `{"charged":1}`}, &counting{reply: `{"found":2}`}
			srv := serve(t, tc.turns...)
			cfg := config(t, srv, tools(charge, lookup)...)
			cfg.Messages, cfg.Resume = j.resume(initial, tc.cut)
			got := run(t, cfg)
			if got.Text != want.Text || got.StopReason != want.StopReason || len(got.Steps) != len(want.Steps) {
				t.Fatalf("resumed: %q %s %d steps, want %q %s %d", got.Text, got.StopReason, len(got.Steps), want.Text, want.StopReason, len(want.Steps))
			}
			if n := len(srv.Requests()); n != len(tc.turns) {
				t.Errorf("the model was asked %d times, want %d", n, len(tc.turns))
			}
			if charge.n() != tc.charges || lookup.n() != tc.look {
				t.Errorf("charge ran %d times, lookup %d; want %d and %d", charge.n(), lookup.n(), tc.charges, tc.look)
			}
			hist := toolMessages(t, srv, len(tc.turns)-1)
			for k, m := range hist {
				if m.ToolCallID == tc.interrupted {
					if !strings.Contains(m.Content, agent.Interrupted) {
						t.Errorf("%s's result %s, want %q", m.ToolCallID, m.Content, agent.Interrupted)
					}
					continue
				}
				if m.Content != wantHistory[k].Content {
					t.Errorf("%s's result %s, want %s as uninterrupted", m.ToolCallID, m.Content, wantHistory[k].Content)
				}
			}
		})
	}
}

// A Resume whose steps are out of order is refused before anything runs.
func TestResumeRefusesBadSteps(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{Text: "x"})
	cfg := config(t, srv)
	cfg.Resume = &agent.Resume{Steps: []agent.Step{{Index: 1}}}
	if _, err := agent.Run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "index") {
		t.Errorf("steps out of order: %v", err)
	}
	if len(srv.Requests()) != 0 {
		t.Error("the model was asked")
	}
}
