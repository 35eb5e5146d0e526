package openaicompat_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

var caseErrors = map[string]error{
	"stream-cut":      model.ErrStreamCut,
	"malformed-chunk": model.ErrMalformedChunk,
	"no-choices":      model.ErrNoChoices,
	"model-reported":  model.ErrModelReported,
}

// TestCompat replays, through a real server, streams as compatible servers
// send them (testdata/compat.json) and checks the turn each assembles.
func TestCompat(t *testing.T) {
	t.Parallel()
	for _, c := range openaicompat.LoadCompatCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			tn := scripted.Turn{SSE: c.SSE}
			if c.SSE == "" {
				tn.Chunks = c.DataChunks()
			}
			p := provider(t, serve(t, tn), nil)
			evs, resp, err := turn(t, p, ask)
			if c.Error != "" {
				want := caseErrors[c.Error]
				if want == nil {
					t.Fatalf("case error %q is not one of the known ones", c.Error)
				}
				if !errors.Is(err, want) {
					t.Fatalf("got %v, want %v", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want a Response", err)
			}
			checkResponse(t, c.Want, resp)
			checkEvents(t, evs, resp)
		})
	}
}

func checkResponse(t *testing.T, w openaicompat.CompatWant, r model.Response) {
	t.Helper()
	if w.ID != "" && r.ID != w.ID {
		t.Errorf("got id %q, want %q", r.ID, w.ID)
	}
	if w.Model != "" && r.Model != w.Model {
		t.Errorf("got model %q, want %q", r.Model, w.Model)
	}
	if r.Message.Role != model.RoleAssistant || r.Message.Content != w.Text || r.Refusal != w.Refusal {
		t.Errorf("got role %q text %q refusal %q, want assistant, %q, %q", r.Message.Role, r.Message.Content, r.Refusal, w.Text, w.Refusal)
	}
	if string(r.FinishReason) != w.Finish || r.RawFinishReason != w.RawFinish {
		t.Errorf("got finish %q (raw %q), want %q (raw %q)", r.FinishReason, r.RawFinishReason, w.Finish, w.RawFinish)
	}
	if u := r.Usage; u.PromptTokens != w.Usage.PromptTokens || u.CompletionTokens != w.Usage.CompletionTokens || u.TotalTokens != w.Usage.TotalTokens {
		t.Errorf("got usage %+v, want %+v", u, w.Usage)
	}
	if len(r.Message.ToolCalls) != len(w.Calls) {
		t.Fatalf("got %d calls %+v, want %d", len(r.Message.ToolCalls), r.Message.ToolCalls, len(w.Calls))
	}
	ids := map[string]bool{}
	for i, wc := range w.Calls {
		c := r.Message.ToolCalls[i]
		switch {
		case wc.ID == "*" && !strings.HasPrefix(c.ID, "call_"):
			t.Errorf("call %d: got id %q, want a generated call_ id", i, c.ID)
		case wc.ID != "*" && c.ID != wc.ID:
			t.Errorf("call %d: got id %q, want %q", i, c.ID, wc.ID)
		}
		if ids[c.ID] {
			t.Errorf("call %d: id %q repeats", i, c.ID)
		}
		ids[c.ID] = true
		if c.Name != wc.Name || c.Arguments != wc.Arguments {
			t.Errorf("call %d: got %s(%s), want %s(%s)", i, c.Name, c.Arguments, wc.Name, wc.Arguments)
		}
		if (c.ArgumentsErr != nil) != wc.Invalid {
			t.Errorf("call %d: got arguments error %v, want one: %v", i, c.ArgumentsErr, wc.Invalid)
		}
		if c.ArgumentsErr != nil && !errors.Is(c.ArgumentsErr, model.ErrInvalidArguments) {
			t.Errorf("call %d: got %v, want ErrInvalidArguments", i, c.ArgumentsErr)
		}
	}
}

// checkEvents checks that the deltas add up to the Response.
func checkEvents(t *testing.T, evs []model.Event, r model.Response) {
	t.Helper()
	var text strings.Builder
	args := make([]strings.Builder, len(r.Message.ToolCalls))
	for _, ev := range evs {
		switch ev := ev.(type) {
		case model.TextDelta:
			text.WriteString(ev.Text)
		case model.ToolCallDelta:
			if ev.Index < 0 || ev.Index >= len(args) {
				t.Fatalf("got a delta for call %d of %d", ev.Index, len(args))
			}
			if c := r.Message.ToolCalls[ev.Index]; ev.ID != "" && ev.ID != c.ID {
				t.Errorf("delta for call %d: got id %q, want %q", ev.Index, ev.ID, c.ID)
			}
			args[ev.Index].WriteString(ev.Arguments)
		default:
			t.Errorf("got event %T", ev)
		}
	}
	if text.String() != r.Message.Content {
		t.Errorf("text deltas add up to %q, want %q", text.String(), r.Message.Content)
	}
	for i, c := range r.Message.ToolCalls {
		if got := args[i].String(); got != c.Arguments && !(got == "" && c.Arguments == "{}") {
			t.Errorf("call %d: deltas add up to %q, want %q", i, got, c.Arguments)
		}
	}
}
