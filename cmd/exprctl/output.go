package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// output is where a codemode or tools command prints: text for people, or
// with --json one JSON object a line for scripts. It is safe for concurrent
// use, so events printed from two goroutines never interleave.
type output struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
}

// registerJSON adds --json to fs.
func (o *output) registerJSON(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object a line, for scripts")
}

// textf prints for people; nothing with --json.
func (o *output) textf(format string, args ...any) {
	if o.json {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format, args...)
}

// object prints v as one line of JSON; nothing without --json.
func (o *output) object(v any) {
	if !o.json {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Every value printed is built here from JSON-safe parts.
		panic(fmt.Sprintf("exprctl: an event does not marshal: %v", err))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
}

// rawJSON is JSON text from the server as it is inside a JSON line:
// nil (left out) when empty, a string when they are not JSON.
func rawJSON(b string) json.RawMessage {
	if strings.TrimSpace(b) == "" {
		return nil
	}
	var c bytes.Buffer
	if err := json.Compact(&c, []byte(b)); err != nil {
		s, _ := json.Marshal(b)
		return s
	}
	return c.Bytes()
}

// rejectedText tells a Rejected as exprctl prints it: what was rejected,
// then its status's code and message, as errorText puts a gRPC error ("the
// server rejected the state: InvalidArgument: state_json: ...").
func rejectedText(r *exprdv1.Rejected) string {
	st := (&client.RejectedError{Rejected: r}).GRPCStatus()
	what := r.GetKind()
	if what == "" {
		what = "message"
	}
	return fmt.Sprintf("the server rejected the %s: %s: %s", what, st.Code(), st.Message())
}
