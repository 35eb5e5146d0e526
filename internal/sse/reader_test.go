package sse_test

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/exprd/exprd/internal/sse"
)

// ev is an event copied out of the reader, with its fields as strings.
type ev struct{ Type, Data, ID string }

func (e ev) String() string { return fmt.Sprintf("{%q %q %q}", e.Type, e.Data, e.ID) }

// readAll reads events until an error; the error is returned as it came.
func readAll(t *testing.T, r *sse.Reader) ([]ev, error) {
	t.Helper()
	var out []ev
	for range 10_000 {
		e, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev{e.Type, string(e.Data), e.ID})
	}
	t.Fatal("more than 10000 events")
	return nil, nil
}

func msg(data string) ev { return ev{Type: "message", Data: data} }

// The end a case must reach.
const (
	endEOF          = "eof"
	endUnterminated = "unterminated"
	endTooLarge     = "too-large"
)

func endOf(err error) string {
	var ue *sse.UnterminatedError
	switch {
	case err == io.EOF:
		return endEOF
	case errors.As(err, &ue) && errors.Is(err, sse.ErrUnterminated):
		return endUnterminated
	case errors.Is(err, sse.ErrTooLarge):
		return endTooLarge
	}
	return fmt.Sprintf("error %v", err)
}

func TestReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		max   int // 0: 1024
		want  []ev
		end   string
		retry time.Duration // -1: none set
	}{
		{name: "LF", in: "data: a\n\ndata: b\n\n", want: []ev{msg("a"), msg("b")}},
		{name: "CRLF", in: "data: a\r\n\r\ndata: b\r\n\r\n", want: []ev{msg("a"), msg("b")}},
		{name: "lone CR", in: "data: a\r\rdata: b\r\r", want: []ev{msg("a"), msg("b")}},
		{name: "mixed line ends", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []ev{msg("a\nb\nc")}},
		{name: "CR then LF is one line end, LF then CR two", in: "data: a\n\rdata: b\r\n\n", want: []ev{msg("a"), msg("b")}},
		{name: "data lines joined with LF", in: "data: one\ndata: two\ndata: three\n\n", want: []ev{msg("one\ntwo\nthree")}},
		{name: "no space after the colon", in: "data:a\n\n", want: []ev{msg("a")}},
		{name: "only one space removed", in: "data:  a \n\n", want: []ev{msg(" a ")}},
		{name: "a colon in the value", in: "data: {\"a\": 1}\n\n", want: []ev{msg(`{"a": 1}`)}},
		{name: "a field with no colon has an empty value", in: "data\n\n", want: []ev{msg("")}},
		{name: "empty data lines", in: "data\ndata\n\n", want: []ev{msg("\n")}},
		{name: "data: with nothing after it", in: "data:\n\n", want: []ev{msg("")}},
		{name: "comments", in: ": hello\ndata: a\n:\n: bye\n\n", want: []ev{msg("a")}},
		{name: "event type", in: "event: add\ndata: 1\n\ndata: 2\n\n", want: []ev{{"add", "1", ""}, msg("2")}},
		{name: "the last event line wins", in: "event: a\nevent: b\ndata: x\n\n", want: []ev{{"b", "x", ""}}},
		{name: "a blank line without data resets the type", in: "event: add\n\ndata: 1\n\n", want: []ev{msg("1")}},
		{name: "empty event field is message", in: "event\ndata: 1\n\n", want: []ev{msg("1")}},
		{name: "id carries over", in: "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", want: []ev{{"message", "a", "7"}, {"message", "b", "7"}, {"message", "c", ""}}},
		{name: "id set by an event without data", in: "id: 3\n\ndata: a\n\n", want: []ev{{"message", "a", "3"}}},
		{name: "id with a NUL is ignored", in: "id: 1\nid: a\x00b\ndata: x\n\n", want: []ev{{"message", "x", "1"}}},
		{name: "retry", in: "retry: 1500\ndata: x\n\n", want: []ev{msg("x")}, retry: 1500 * time.Millisecond},
		{name: "retry not digits is ignored", in: "retry: 1500\nretry: 15s\nretry: -1\nretry:\nretry: 1 \ndata: x\n\n", want: []ev{msg("x")}, retry: 1500 * time.Millisecond},
		{name: "retry too large is ignored", in: "retry: 99999999999999999999\ndata: x\n\n", want: []ev{msg("x")}, retry: -1},
		{name: "unknown fields are ignored", in: "foo: bar\nData: no\n data: no\ndata: yes\n\n", want: []ev{msg("yes")}},
		{name: "a byte-order mark at the start", in: "\xef\xbb\xbfdata: a\n\n", want: []ev{msg("a")}},
		{name: "only one byte-order mark", in: "\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n", want: []ev{msg("b")}},
		{name: "a byte-order mark later is data", in: "data: \xef\xbb\xbfa\n\n", want: []ev{msg("\xef\xbb\xbfa")}},
		{name: "part of a byte-order mark", in: "\xef\xbb", want: nil},
		{name: "blank lines only", in: "\n\r\n\r", want: nil},
		{name: "empty", in: "", want: nil},
		{name: "bytes are not decoded", in: "data: \xff\xfe\n\n", want: []ev{msg("\xff\xfe")}},

		{name: "cut: the last data line has no end", in: "data: a\n\ndata: b", want: []ev{msg("a")}, end: endUnterminated},
		{name: "cut: no blank line after the data", in: "data: a\n\ndata: b\n", want: []ev{msg("a")}, end: endUnterminated},
		{name: "cut: no blank line after CR", in: "data: b\r", end: endUnterminated},
		{name: "cut: a field with no colon at the end", in: "data", end: endUnterminated},
		{name: "not cut: a comment at the end", in: "data: a\n\n: ping", want: []ev{msg("a")}},
		{name: "not cut: an event field at the end", in: "data: a\n\nevent: x\n", want: []ev{msg("a")}},
		{name: "not cut: an unfinished unknown field", in: "data: a\n\nda", want: []ev{msg("a")}},

		{name: "a line at the limit", in: "data: " + strings.Repeat("x", 10) + "\n\n", max: 16, want: []ev{msg(strings.Repeat("x", 10))}},
		{name: "a line at the limit with CRLF", in: "data: " + strings.Repeat("x", 10) + "\r\n\r\n", max: 16, want: []ev{msg(strings.Repeat("x", 10))}},
		{name: "a line past the limit", in: "data: a\n\ndata: " + strings.Repeat("x", 11) + "\n\n", max: 16, want: []ev{msg("a")}, end: endTooLarge},
		{name: "an unended line past the limit", in: "data: " + strings.Repeat("x", 11), max: 16, end: endTooLarge},
		{name: "a comment past the limit", in: ":" + strings.Repeat("x", 16) + "\n", max: 16, end: endTooLarge},
		{name: "an event at the limit", in: "data: 1234567\ndata: 12345678\n\n", max: 16, want: []ev{msg("1234567\n12345678")}},
		{name: "an event past the limit", in: "data: 12345678\ndata: 12345678\n\n", max: 16, end: endTooLarge},
		{name: "a limit of one byte", in: "a\n\n", max: 1},
		{name: "past a limit of one byte", in: "ab\n\n", max: 1, end: endTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			limit := tt.max
			if limit == 0 {
				limit = 1024
			}
			end := tt.end
			if end == "" {
				end = endEOF
			}
			for _, src := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tt.in)},
				{"one byte at a time", iotest.OneByteReader(strings.NewReader(tt.in))},
				{"data with the EOF", iotest.DataErrReader(strings.NewReader(tt.in))},
			} {
				r := sse.NewReader(src.r, limit)
				got, err := readAll(t, r)
				if !reflect.DeepEqual(got, tt.want) || endOf(err) != end {
					t.Errorf("%s: got %v then %s, want %v then %s", src.name, got, endOf(err), tt.want, end)
				}
				wantRetry, wantSet := tt.retry, tt.retry > 0
				if tt.retry < 0 {
					wantRetry = 0
				}
				if d, set := r.Retry(); d != wantRetry || set != wantSet {
					t.Errorf("%s: got retry %v (%v), want %v (%v)", src.name, d, set, wantRetry, wantSet)
				}
			}
		})
	}
}

// TestUnterminatedHoldsTheEvent: the cut event's type, data and id come
// with the error.
func TestUnterminatedHoldsTheEvent(t *testing.T) {
	t.Parallel()
	r := sse.NewReader(strings.NewReader("id: 4\nevent: end\ndata: [DONE]"), 64)
	_, err := r.Next()
	var ue *sse.UnterminatedError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want an *UnterminatedError", err)
	}
	if got := (ev{ue.Event.Type, string(ue.Event.Data), ue.Event.ID}); got != (ev{"end", "[DONE]", "4"}) {
		t.Errorf("got %v, want the pending event", got)
	}
}

// TestReadError: the events before a read error come first, then the
// error as the source gave it, every time after.
func TestReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: cut mid"), iotest.ErrReader(boom))
	r := sse.NewReader(src, 64)
	got, err := readAll(t, r)
	if !reflect.DeepEqual(got, []ev{msg("a")}) || err != boom {
		t.Fatalf("got %v then %v, want [a] then %v", got, err, boom)
	}
	if _, err := r.Next(); err != boom {
		t.Errorf("again: got %v, want %v", err, boom)
	}
}

// TestErrorsStay: after the end or a limit error, Next returns the same.
func TestErrorsStay(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"data: a\n\n", "data: a", strings.Repeat("x", 20)} {
		r := sse.NewReader(strings.NewReader(in), 16)
		_, first := readAll(t, r)
		for range 2 {
			if _, err := r.Next(); err != first {
				t.Errorf("%q: got %v, want %v again", in, err, first)
			}
		}
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	t.Parallel()
	r := sse.NewReader(emptyReader{}, 16)
	if _, err := r.Next(); err != io.ErrNoProgress {
		t.Errorf("got %v, want io.ErrNoProgress", err)
	}
}

func TestNewReaderRefusesNoLimit(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewReader(%d): got no panic", n)
				}
			}()
			sse.NewReader(strings.NewReader(""), n)
		}()
	}
}

// TestLongLineInSmallReads: a line near the limit, arriving in small
// reads, is read whole.
func TestLongLineInSmallReads(t *testing.T) {
	t.Parallel()
	const n = 1 << 20
	body := "data: " + strings.Repeat("x", n) + "\n\n"
	r := sse.NewReader(iotest.HalfReader(strings.NewReader(body)), n+6)
	e, err := r.Next()
	if err != nil || len(e.Data) != n {
		t.Fatalf("got %d bytes and %v, want %d bytes", len(e.Data), err, n)
	}
}

// BenchmarkReader reads a model's streamed reply: 50 chunks of about 150
// bytes and the end marker.
func BenchmarkReader(b *testing.B) {
	var body strings.Builder
	for i := range 50 {
		fmt.Fprintf(&body, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word %d \"},\"finish_reason\":null}]}\n\n", i)
	}
	body.WriteString("data: [DONE]\n\n")
	in := body.String()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := sse.NewReader(strings.NewReader(in), 8<<20)
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			n++
		}
		if n != 51 {
			b.Fatalf("got %d events, want 51", n)
		}
	}
}
