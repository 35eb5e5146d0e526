package openaicompat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/exprd/exprd/model"
)

// streamErrors is every error a stream may end with on its own.
var streamErrors = []error{model.ErrStreamCut, model.ErrMalformedChunk, model.ErrNoChoices, model.ErrModelReported, model.ErrReplyTooLarge}

func oneOf(err error, set []error) bool {
	for _, e := range set {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// FuzzStream feeds arbitrary bodies to the stream reader: no panic, no
// hang, every error from the expected set, and a Response that agrees with
// its deltas. Seeds: the compatibility cases.
func FuzzStream(f *testing.F) {
	for _, c := range LoadCompatCases(f) {
		f.Add([]byte(c.Body()))
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\"},{\"index\":1,\"id\":\"a\"}]},\"finish_reason\":\"stop\"}]}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithCancel(context.Background())
		s := newChatStream(ctx, cancel, &Provider{name: "fuzz"}, io.NopCloser(bytes.NewReader(body)))
		defer s.Close()
		var text strings.Builder
		args := map[int]string{}
		for n := 0; ; n++ {
			if n > 2*len(body)+2 {
				t.Fatalf("more than %d events from %d bytes", n, len(body))
			}
			ev, err := s.Recv()
			if err != nil {
				if !oneOf(err, streamErrors) {
					t.Fatalf("got error %v, want one of %v", err, streamErrors)
				}
				return
			}
			switch ev := ev.(type) {
			case model.TextDelta:
				text.WriteString(ev.Text)
			case model.ToolCallDelta:
				args[ev.Index] += ev.Arguments
			case model.Response:
				checkResponse(t, ev, text.String(), args)
				if _, err := s.Recv(); err != io.EOF {
					t.Fatalf("after the Response: got %v, want io.EOF", err)
				}
				return
			}
		}
	})
}

// FuzzCompletion feeds arbitrary bodies to the non-streamed reply reader.
func FuzzCompletion(f *testing.F) {
	f.Add([]byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}],"function_call":{"name":"g","arguments":""}},"finish_reason":"weird"}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`{"choices":`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var wc wireCompletion
		if err := decodeBody(bytes.NewReader(body), &wc); err != nil {
			if !errors.Is(err, model.ErrMalformedChunk) && !errors.Is(err, model.ErrReplyTooLarge) {
				t.Fatalf("got %v, want ErrMalformedChunk or ErrReplyTooLarge", err)
			}
			return
		}
		r, err := responseFromCompletion(&wc)
		if err != nil {
			if !errors.Is(err, model.ErrNoChoices) {
				t.Fatalf("got %v, want ErrNoChoices", err)
			}
			return
		}
		checkResponse(t, r, r.Message.Content, nil)
	})
}

var finishReasons = map[model.FinishReason]bool{
	model.FinishStop: true, model.FinishToolCalls: true, model.FinishLength: true,
	model.FinishContentFilter: true, model.FinishOther: true,
}

func checkResponse(t *testing.T, r model.Response, text string, args map[int]string) {
	t.Helper()
	if !finishReasons[r.FinishReason] {
		t.Fatalf("got finish reason %q, not one of the closed set", r.FinishReason)
	}
	if r.Message.Role != model.RoleAssistant || r.Message.Content != text {
		t.Fatalf("got role %q content %q, want assistant and the deltas' %q", r.Message.Role, r.Message.Content, text)
	}
	ids := map[string]bool{}
	for i, c := range r.Message.ToolCalls {
		if c.ID == "" || ids[c.ID] {
			t.Fatalf("call %d: got id %q, empty or repeated", i, c.ID)
		}
		ids[c.ID] = true
		norm, err := model.NormalizeArguments(c.Arguments)
		if (err == nil) != (c.ArgumentsErr == nil) || norm != c.Arguments {
			t.Fatalf("call %d: arguments %q with error %v disagree with NormalizeArguments", i, c.Arguments, c.ArgumentsErr)
		}
		if args != nil {
			if got := args[i]; got != c.Arguments && !(strings.TrimSpace(got) == "" && c.Arguments == "{}") {
				t.Fatalf("call %d: deltas add up to %q, want %q", i, got, c.Arguments)
			}
		}
	}
	for i := range args {
		if i < 0 || i >= len(r.Message.ToolCalls) {
			t.Fatalf("got deltas for call %d of %d", i, len(r.Message.ToolCalls))
		}
	}
	if len(r.Message.ToolCalls) > 0 && r.FinishReason == model.FinishStop {
		t.Fatal("got finish stop with tool calls")
	}
}
