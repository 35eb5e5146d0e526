package mcptransport

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type lines struct {
	mu  sync.Mutex
	got []slog.Record
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.got = append(l.got, r)
	l.mu.Unlock()
	return nil
}
func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }

// A stdio server's stderr: a line cut at MaxStderrLineBytes, one past
// whole; StderrLinesPerMinute lines logged, the next counted.
func TestStderrBounds(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	in.WriteString(strings.Repeat("a", MaxStderrLineBytes-1) + "\n")
	in.WriteString(strings.Repeat("b", MaxStderrLineBytes+1) + "\n")
	for i := range StderrLinesPerMinute - 2 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	in.WriteString("one too many\n")
	h := &lines{}
	logStderr(strings.NewReader(in.String()), slog.New(h))
	var logged []string
	dropped := int64(-1)
	for _, r := range h.got {
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "line":
				logged = append(logged, a.Value.String())
			case "dropped":
				dropped = a.Value.Int64()
			}
			return true
		})
	}
	if len(logged) != StderrLinesPerMinute || dropped != 1 {
		t.Fatalf("logged %d lines, dropped %d; want %d and 1", len(logged), dropped, StderrLinesPerMinute)
	}
	if len(logged[0]) != MaxStderrLineBytes-1 || len(logged[1]) != MaxStderrLineBytes {
		t.Errorf("line lengths %d and %d, want %d and %d", len(logged[0]), len(logged[1]), MaxStderrLineBytes-1, MaxStderrLineBytes)
	}
}
