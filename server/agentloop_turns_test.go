package server_test

import (
	"regexp"
	"testing"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
)

var turnIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// checkSeqs fails unless events are numbered from first with no gaps, and
// only the one numbered 1 names the turn (id, when not "").
func checkSeqs(t *testing.T, events []*exprdv1.AgentLoopRunResponse, first uint64, id string) {
	t.Helper()
	for i, m := range events {
		if want := first + uint64(i); m.GetSeq() != want {
			t.Fatalf("event %d (%v): seq %d, want %d", i, m, m.GetSeq(), want)
		}
		switch {
		case m.GetSeq() == 1 && !turnIDPattern.MatchString(m.GetTurnId()):
			t.Fatalf("first event: turn_id %q, want 32 hex digits", m.GetTurnId())
		case m.GetSeq() == 1 && id != "" && m.GetTurnId() != id:
			t.Fatalf("first event: turn_id %q, want %q", m.GetTurnId(), id)
		case m.GetSeq() > 1 && i > 0 && m.GetTurnId() != "":
			t.Fatalf("event seq %d names the turn (%q): only the first does", m.GetSeq(), m.GetTurnId())
		}
	}
}

// Every event of a turn carries its seq, from 1 with no gaps, whatever
// the turn leaves out; the first names the turn, and no two turns share
// an id.
func TestAgentLoopTurnIDAndSeq(t *testing.T) {
	t.Parallel()
	twoSteps := []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "add", Arguments: args(map[string]any{"a": 1, "b": 2})}}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: "It is three."},
	}
	for _, tc := range []struct {
		name  string
		start *exprdv1.AgentStart
	}{
		{"every event", &exprdv1.AgentStart{Messages: userMsg("Add."), Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}}}},
		{"events omitted", &exprdv1.AgentStart{Messages: userMsg("Add."), Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}},
			OmitEvents: []exprdv1.AgentEvent{exprdv1.AgentEvent_AGENT_EVENT_STEP_STARTED, exprdv1.AgentEvent_AGENT_EVENT_TEXT_DELTA}}},
		{"only done", &exprdv1.AgentStart{Messages: userMsg("Add."), Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}},
			OmitEvents: omittable()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := agentServerWith(t, scripted.Script{Turns: twoSteps, Loop: true})
			ids := map[string]bool{}
			for range 3 {
				events, err := drain(startAgent(t, c, tc.start), nil)
				if err != nil {
					t.Fatal(err)
				}
				checkSeqs(t, events, 1, "")
				if ids[events[0].GetTurnId()] {
					t.Fatalf("turn id %s given twice", events[0].GetTurnId())
				}
				ids[events[0].GetTurnId()] = true
			}
		})
	}
}
