package openaicompat

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/exprd/exprd/model"
)

// Keys of tool-call slots that have no wire index of their own: far from
// any index a server sends.
const (
	slotNoIndex      int64 = -1 << 62 // a delta without "index"
	slotFunctionCall int64 = -1<<62 + 1
)

// assembler builds a Response out of chunks, and the deltas of each chunk.
// It is written for servers that stray from OpenAI's stream: it keeps
// chunks whose id differs from the first one's, and takes usage as
// cumulative (servers that report running usage on every chunk would
// otherwise be counted many times).
type assembler struct {
	id, model string
	text      strings.Builder
	refusal   strings.Builder
	calls     []call
	// slots maps a wire index to the latest call opened at it.
	slots     map[int64]int
	named     int             // calls with a name so far
	ids       map[string]bool // the calls' ids so far
	finish    string
	sawFinish bool
	sawChoice bool
	usage     model.Usage
	size      int // bytes of text, refusal, names and arguments so far, and CallBytes a call
}

type call struct {
	wireID   string // the id the server sent
	id, name string // id: wireID, unless an earlier call has it
	args     []byte // not a strings.Builder: calls is a slice that grows, and moves
	// out is the call's place in the Response, -1 until it has a name: a
	// call that never gets one is no call, and is left out.
	out int
}

// add takes in one chunk and appends its deltas to out.
func (a *assembler) add(c *wireChunk, out *[]model.Event) {
	if u := c.Usage; u != nil {
		// Usage is cumulative: the last report wins.
		a.usage = usage(u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // one choice is asked for; ignore any other
		}
		a.sawChoice = true
		d := &ch.Delta
		a.size += len(d.Content) + len(d.Refusal)
		if d.Content != "" {
			a.text.WriteString(d.Content)
			*out = append(*out, model.TextDelta{Text: d.Content})
		}
		a.refusal.WriteString(d.Refusal)
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			slot := slotNoIndex
			if tc.Index != nil {
				slot = *tc.Index
			}
			a.toolDelta(slot, tc.ID, tc.Function.Name, string(tc.Function.Arguments), out)
		}
		if fc := d.FunctionCall; fc != nil && (fc.Name != "" || fc.Arguments != "") {
			a.toolDelta(slotFunctionCall, "", fc.Name, string(fc.Arguments), out)
		}
		if ch.FinishReason != "" {
			a.finish, a.sawFinish = ch.FinishReason, true
		}
	}
}

// toolDelta adds a piece of a tool call. A delta opens a new call when its
// slot has none yet, or when it carries an id other than the slot's call's:
// some servers send every call of a turn at index 0 (or with no index), each
// whole and with its own id. A name equal to the call's is a repeat (some
// servers send it on every delta); another name continues it. Deltas are
// sent from the call's first name on, the first with the arguments so far.
func (a *assembler) toolDelta(slot int64, id, name, args string, out *[]model.Event) {
	if a.slots == nil {
		a.slots = map[int64]int{}
	}
	pos, ok := a.slots[slot]
	if !ok || (id != "" && a.calls[pos].wireID != "" && id != a.calls[pos].wireID) {
		pos = len(a.calls)
		a.calls = append(a.calls, call{out: -1})
		a.slots[slot] = pos
		a.size += CallBytes
	}
	c := &a.calls[pos]
	a.size += len(name) + len(args)
	if c.wireID == "" && id != "" {
		c.wireID, c.id = id, id
		if a.ids[id] {
			// Another call has it: its result could not be told apart.
			c.id = newCallID()
		}
		if a.ids == nil {
			a.ids = map[string]bool{}
		}
		a.ids[c.id] = true
	}
	if name != "" && name != c.name {
		c.name += name
	}
	c.args = append(c.args, args...)
	switch {
	case c.out >= 0:
		*out = append(*out, model.ToolCallDelta{Index: c.out, ID: c.id, Name: c.name, Arguments: args})
	case c.name != "":
		c.out = a.named
		a.named++
		*out = append(*out, model.ToolCallDelta{Index: c.out, ID: c.id, Name: c.name, Arguments: string(c.args)})
	}
}

// response is the assembled turn. It fails only when no choice came at all.
func (a *assembler) response() (model.Response, error) {
	if !a.sawChoice {
		return model.Response{}, model.ErrNoChoices
	}
	r := model.Response{
		ID:              a.id,
		Model:           a.model,
		Message:         model.Message{Role: model.RoleAssistant, Content: a.text.String()},
		Refusal:         a.refusal.String(),
		RawFinishReason: a.finish,
		Usage:           a.usage,
	}
	if a.named > 0 {
		r.Message.ToolCalls = make([]model.ToolCall, a.named)
	}
	for i := range a.calls {
		c := &a.calls[i]
		if c.out < 0 {
			continue
		}
		tc := model.ToolCall{ID: c.id, Name: c.name}
		tc.Arguments, tc.ArgumentsErr = model.NormalizeArguments(string(c.args))
		r.Message.ToolCalls[c.out] = tc
	}
	for i := range r.Message.ToolCalls {
		if tc := &r.Message.ToolCalls[i]; tc.ID == "" {
			tc.ID = newCallID()
		}
	}
	r.FinishReason = finishReason(a.finish, len(r.Message.ToolCalls) > 0)
	return r, nil
}

// finishReason maps the server's finish reason onto the closed set. A turn
// with tool calls that says "stop" or nothing is a tool-calls turn: several
// servers (and some OpenAI models) say "stop" there.
func finishReason(raw string, hasCalls bool) model.FinishReason {
	var r model.FinishReason
	switch raw {
	case "stop", "eos", "end_turn", "stop_sequence", "":
		r = model.FinishStop
	case "tool_calls", "function_call", "tool_use":
		r = model.FinishToolCalls
	case "length", "max_tokens", "model_length":
		r = model.FinishLength
	case "content_filter", "safety":
		r = model.FinishContentFilter
	default:
		r = model.FinishOther
	}
	if hasCalls && r == model.FinishStop {
		r = model.FinishToolCalls
	}
	return r
}

func usage(prompt, completion, total int64) model.Usage {
	out := model.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out
}

// newCallID names a call the server left without an id.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}

// responseFromCompletion converts a reply that came in one piece.
func responseFromCompletion(wc *wireCompletion) (model.Response, error) {
	if len(wc.Choices) == 0 {
		return model.Response{}, model.ErrNoChoices
	}
	ch := &wc.Choices[0]
	for i := range wc.Choices {
		if wc.Choices[i].Index == 0 {
			ch = &wc.Choices[i]
			break
		}
	}
	a := assembler{id: wc.ID, model: wc.Model, sawChoice: true, finish: ch.FinishReason}
	m := &ch.Message
	a.text.WriteString(m.Content)
	a.refusal.WriteString(m.Refusal)
	var discard []model.Event
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		if tc.Type != "" && tc.Type != "function" {
			continue // custom tools are never offered
		}
		a.toolDelta(int64(i), tc.ID, tc.Function.Name, string(tc.Function.Arguments), &discard)
	}
	if fc := m.FunctionCall; fc != nil && fc.Name != "" {
		a.toolDelta(slotFunctionCall, "", fc.Name, string(fc.Arguments), &discard)
	}
	if u := wc.Usage; u != nil {
		a.usage = usage(u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
	return a.response()
}
