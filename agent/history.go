package agent

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/exprd/exprd/model"
)

// The turn's history is what every model request carries: the system
// prompt, the tools declared, and the messages so far (and the model's
// name, counted with it when a request is checked). Its size is counted
// as the JSON of the chat-completions wire form (what the model providers
// send), escaping as encoding/json does by default, which no provider's
// encoding exceeds: a request is never larger than what was counted.

// historyBytes counts the history of a turn: fixed is the system prompt's
// and the tools' part, which does not change; messages the turn's messages
// so far.
type historyBytes struct {
	fixed, messages int64
}

func (h historyBytes) total() int64 { return h.fixed + h.messages }

// messagesBytes is the JSON of msgs as the array a request carries.
func messagesBytes(msgs []model.Message) int64 {
	n := int64(2) // [ ]
	for i := range msgs {
		n += messageBytes(&msgs[i]) + 1 // and a comma
	}
	return n
}

// messageBytes is the JSON of one message in the wire form:
// {"role":R,"content":C,"tool_calls":[{"id":I,"type":"function","function":{"name":N,"arguments":A}}],"tool_call_id":T}
// counted with every member present, so that it is never less than what a
// provider that leaves empty ones out sends.
func messageBytes(m *model.Message) int64 {
	n := int64(len(`{"role":,"content":,"tool_calls":[],"tool_call_id":}`))
	n += stringBytes(string(m.Role)) + stringBytes(m.Content) + stringBytes(m.ToolCallID)
	for _, c := range m.ToolCalls {
		n += int64(len(`{"id":,"type":"function","function":{"name":,"arguments":}},`))
		n += stringBytes(c.ID) + stringBytes(c.Name) + stringBytes(c.Arguments)
	}
	return n
}

// toolBytes is the JSON of one tool declaration in the wire form:
// {"type":"function","function":{"name":N,"description":D,"parameters":P}},
func toolBytes(t *model.Tool) int64 {
	n := int64(len(`{"type":"function","function":{"name":,"description":,"parameters":}},`))
	n += stringBytes(t.Name) + stringBytes(t.Description)
	if len(t.Parameters) == 0 {
		return n + int64(len(`{"type":"object","properties":{}}`)) // what a provider sends for none
	}
	return n + rawBytes(t.Parameters)
}

// stringBytes is the length of s as a JSON string, quotes included,
// escaped as encoding/json escapes by default: '"' and '\' and the common
// control characters take 2 bytes, other control characters, '<', '>',
// '&', U+2028, U+2029 and each byte of invalid UTF-8 take 6.
func stringBytes(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += int64(size)
		}
		i += size
	}
	return n
}

// rawBytes bounds the JSON encoding/json writes for raw JSON: compacted,
// so never longer, but with '<', '>', '&', U+2028 and U+2029 escaped to 6
// bytes (and invalid UTF-8 too).
func rawBytes(raw json.RawMessage) int64 {
	n := int64(0)
	for i := 0; i < len(raw); {
		b := raw[i]
		if b < utf8.RuneSelf {
			if b == '<' || b == '>' || b == '&' {
				n += 6
			} else {
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += int64(size)
		}
		i += size
	}
	return n
}

// request checks the size of the request step i is about to send: the
// history, or the messages a PrepareStep hook gave the step (prepared,
// their size; -1: none), with the system prompt, the tools and the model's
// name (a client's string too). A history over the limit ends the turn
// here, before the request: the step that grew it has run and finished.
func (l *loop) request(step int, prepared int64, model string) error {
	size := l.history.total()
	if prepared >= 0 {
		size = l.history.fixed + prepared
	}
	size += stringBytes(model)
	if size > l.cfg.MaxHistoryBytes {
		return &HistoryError{Step: step, Prepared: prepared >= 0, Bytes: size, Limit: l.cfg.MaxHistoryBytes}
	}
	// The prepared messages are held beside the turn's while the step runs.
	return l.reserve(l.ctx, step, l.history.fixed+max(l.history.messages, prepared))
}

// reserve asks the caller to hold memory for a history of size bytes
// (Config.ReserveHistory) before it grows to it; the reservation only
// grows.
func (l *loop) reserve(ctx context.Context, step int, size int64) error {
	if f := l.cfg.ReserveHistory; f != nil && size > l.reserved {
		if err := f(ctx, size); err != nil {
			return &HistoryError{Step: step, Bytes: size, Limit: l.cfg.MaxHistoryBytes, Err: err}
		}
		l.reserved = size
	}
	return nil
}
