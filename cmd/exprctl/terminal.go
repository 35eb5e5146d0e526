package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// terminal asks the yes/no questions of a command (an ExprTool confirm, a
// CodeMode approval): the question goes to stderr and the answer is a line
// of stdin, "y" or "yes" to accept; anything else, or the end of stdin,
// declines. --yes or --no answer every question without asking.
type terminal struct {
	mu      sync.Mutex // one question at a time
	in      *bufio.Reader
	stderr  io.Writer
	yes, no bool
	// line is a read of stdin in flight that no question has taken yet: a
	// question given up when its context ended leaves it to the next one,
	// so that stdin is never read by two goroutines at once.
	line chan string
}

func newTerminal(stdin io.Reader, stderr io.Writer, yes, no bool) *terminal {
	return &terminal{in: bufio.NewReader(stdin), stderr: stderr, yes: yes, no: no}
}

// ask puts question and waits for the answer, or for ctx to end (false and
// ctx's error).
func (t *terminal) ask(ctx context.Context, question string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	switch {
	case t.yes:
		fmt.Fprintf(t.stderr, "%s [y/N] y (--yes)\n", question)
		return true, nil
	case t.no:
		fmt.Fprintf(t.stderr, "%s [y/N] n (--no)\n", question)
		return false, nil
	}
	fmt.Fprintf(t.stderr, "%s [y/N] ", question)
	if t.line == nil {
		// A read of stdin cannot be interrupted: wait for it or for ctx,
		// whichever comes first.
		line := make(chan string, 1)
		go func() {
			s, _ := t.in.ReadString('\n')
			line <- s
		}()
		t.line = line
	}
	select {
	case s := <-t.line:
		t.line = nil
		if !strings.HasSuffix(s, "\n") {
			fmt.Fprintln(t.stderr)
		}
		answer := strings.ToLower(strings.TrimSpace(s))
		return answer == "y" || answer == "yes", nil
	case <-ctx.Done():
		fmt.Fprintln(t.stderr)
		return false, ctx.Err()
	}
}
