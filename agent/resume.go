package agent

import (
	"fmt"
	"slices"

	"github.com/exprd/exprd/model"
)

// Interrupted is the result of a call whose result was not recorded when
// the process running it stopped, and whose tool is not Idempotent: the
// call may or may not have happened, so it is not run again, and the
// model is told.
const Interrupted = "interrupted: the replica running this call stopped"

// Resume goes on with a turn another process ran until it stopped (a
// takeover): from what it recorded, as the events told it (Events). With
// it, Config.Messages is the history after Steps (the turn's messages and
// each finished step's HistoryGrew), and the turn goes on at step
// len(Steps).
type Resume struct {
	// Steps are the finished steps, in order (StepFinished's): stop
	// conditions and the step limit count them.
	Steps []Step
	// Reply, when set, is the model's answer in the step that was under
	// way (Replied's), whose model is not called again; nil: that step
	// calls its model again.
	Reply *Reply
}

// Reply is a model's answer in a step, and the results of its calls
// recorded so far.
type Reply struct {
	Message      model.Message // the assistant's, with its calls as the model made them
	FinishReason model.FinishReason
	Usage        model.Usage
	// Results are the recorded results, by call id (ToolResult's).
	Results map[string]Result `json:",omitempty"`
	// Executing are the calls whose executor had begun (CallExecuting's),
	// by id. A call without a result runs again from the start when it
	// had not begun (its approval and hooks asked again) or its tool is
	// Idempotent; any other is answered Interrupted.
	Executing map[string]bool `json:",omitempty"`
}

// resumed is how a step's calls resume: the results recorded, and the
// calls that may not run again.
type resumed struct {
	recorded    map[string]Result
	interrupted map[string]bool
}

// resumeFrom sets the loop up from r: the steps finished, their usage,
// and the step under way.
func (l *loop) resumeFrom(r *Resume) error {
	for i, s := range r.Steps {
		if s.Index != i {
			return fmt.Errorf("agent: resume: step %d has index %d", i, s.Index)
		}
		l.out.Usage = addUsage(l.out.Usage, s.Usage)
		l.out.Text = s.Text
	}
	l.out.Steps = slices.Clone(r.Steps)
	l.first = len(r.Steps)
	l.reply = r.Reply
	if l.reply != nil && l.reply.Message.Role != model.RoleAssistant {
		return fmt.Errorf("agent: resume: the reply's role is %q, want assistant", l.reply.Message.Role)
	}
	return nil
}

// replied is the step's model answer when it resumes one (a takeover):
// the recorded reply, each call's arguments checked again, and what its
// calls resume with. ok is false for a step that calls its model.
func (l *loop) replied(i int) (resp model.Response, res *resumed, ok bool) {
	if i != l.first || l.reply == nil {
		return resp, nil, false
	}
	r := l.reply
	l.reply = nil
	msg := r.Message
	msg.ToolCalls = slices.Clone(msg.ToolCalls)
	res = &resumed{recorded: r.Results, interrupted: map[string]bool{}}
	for j, c := range msg.ToolCalls {
		msg.ToolCalls[j].Arguments, msg.ToolCalls[j].ArgumentsErr = model.NormalizeArguments(c.Arguments)
		if _, done := r.Results[c.ID]; done {
			continue
		}
		if t := l.tools[c.Name]; t != nil && !t.Idempotent && r.Executing[c.ID] {
			res.interrupted[c.ID] = true // a missing tool's call never ran: it is answered as it was
		}
	}
	return model.Response{Message: msg, FinishReason: r.FinishReason, Usage: r.Usage}, res, true
}
