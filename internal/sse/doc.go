// Package sse reads a text/event-stream body (server-sent events) as the
// WHATWG HTML standard's "event stream interpretation" says, one event at a
// time, pulled by the caller: it starts no goroutine and reads only when
// asked. It is exprd's one SSE parser; the model provider and the UTCP sse
// transport both read through it.
//
// The format, as read here:
//
//   - Lines end with CRLF, LF or a lone CR, in any mix; a CRLF split across
//     two reads is one line end. One U+FEFF byte-order mark at the very
//     start of the stream is skipped.
//   - A line starting with ":" is a comment. Any other line is a field:
//     the name up to the first ":", the value after it with one leading
//     space removed; a line without ":" is a field whose value is empty.
//   - "data" appends its value to the event's data, lines joined with "\n";
//     "event" sets the event's type ("message" when none is set); "id" sets
//     the last event ID, which carries over to later events (ignored when
//     it holds a NUL); "retry" of ASCII digits only sets the reconnection
//     time in milliseconds ([Reader.Retry]). Other fields are ignored.
//   - A blank line dispatches the event when data has come since the last
//     one (an event whose only data line is "data" is an event with empty
//     data); otherwise it only resets the event's type.
//
// Bytes are passed on as they are: there is no UTF-8 decoding, and callers
// that need text check it (a JSON decoder does).
//
// Bounds: every line, and every event's data, is at most the maxBytes given
// to [NewReader]; past it [Reader.Next] fails with [ErrTooLarge], having
// buffered no more than maxBytes+1 bytes of the line. Memory stays within a
// few times maxBytes whatever the input.
//
// The end of the stream, the one rule: when the body ends with data pending
// (a data line, terminated or not, with no blank line after it) the event
// is never dispatched, and Next returns an [*UnterminatedError] holding it
// (errors.Is [ErrUnterminated]): the stream was cut. The caller decides what
// a cut means: the model provider calls it a cut reply unless the pending
// data is its end marker. When the body ends with no data pending (after a
// blank line, a comment, or a field that is not data) Next returns io.EOF.
// A read error is returned as the reader gave it, once the complete lines
// before it are read; the partial line it cut is dropped. Every error is
// returned again by later calls.
//
// Cancellation is the reader's: for an HTTP body, the request's context
// ends a blocked read.
package sse
