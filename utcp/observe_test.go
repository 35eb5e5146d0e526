package utcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// observedKey carries, in a call's context, the name of the innermost
// observer that ran: the probe transport answers with it.
type observedKey struct{}

// probeTransport answers a call with the observer name its context
// carries; `fail` makes the call, or a stream's second chunk, fail.
type probeTransport struct{}

func newProbe(json.RawMessage, utcp.Env) (utcp.Transport, error) { return probeTransport{}, nil }

func (probeTransport) Call(ctx context.Context, _ *manual.Tool, args map[string]any) (any, error) {
	if args["fail"] == true {
		return nil, errors.New("the provider failed")
	}
	return ctx.Value(observedKey{}), nil
}

func (probeTransport) Stream(ctx context.Context, _ *manual.Tool, args map[string]any) (utcp.Stream, error) {
	return &probeStream{fail: args["fail"] == true}, nil
}

type probeStream struct {
	fail bool
	n    int
}

func (s *probeStream) Next() (any, error) {
	s.n++
	switch {
	case s.n == 1:
		return "chunk", nil
	case s.fail:
		return nil, errors.New("the stream broke")
	}
	return nil, io.EOF
}

func (s *probeStream) Close() error { return nil }

// observerLog records what observers are told, in order.
type observerLog struct {
	mu     sync.Mutex
	events []string
}

func (l *observerLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
}

func (l *observerLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

func (l *observerLog) observer(name string) utcp.CallObserver {
	return func(ctx context.Context, tool string) (context.Context, func(error)) {
		l.add("%s start %s", name, tool)
		return context.WithValue(ctx, observedKey{}, name), func(err error) {
			kind := "ok"
			switch {
			case errors.Is(err, manual.ErrInvalidArguments):
				kind = "invalid-arguments"
			case errors.Is(err, utcp.ErrTransport):
				kind = "transport"
			case err != nil:
				kind = err.Error()
			}
			l.add("%s end %s %s", name, tool, kind)
		}
	}
}

// TestCallObserverSeesEveryCall: every call of a registered tool, through
// Call or CallStream, is shown to the observers, nested in the order given,
// under the context they return, and ended once with the call's outcome;
// a name the registry does not hold is not.
func TestCallObserverSeesEveryCall(t *testing.T) {
	t.Parallel()
	log := &observerLog{}
	r, err := utcp.New(utcp.WithTransport("probe", newProbe), utcp.WithCallObserver(log.observer("outer")), utcp.WithCallObserver(log.observer("inner")))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	doc := `{"utcp_version": "1.1.0", "tools": [{"name": "p",
	  "inputs": {"type": "object", "properties": {"fail": {"type": "boolean"}}, "additionalProperties": false},
	  "tool_call_template": {"call_template_type": "probe"}}]}`
	if _, err := r.Register(context.Background(), "my-api", utcp.FromText(doc).AllowProtocols("probe")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nested := func(outcome string) []string {
		return []string{"outer start my_api.p", "inner start my_api.p", "inner end my_api.p " + outcome, "outer end my_api.p " + outcome}
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
		want []string
	}{
		{"a call, under the innermost observer's context", func(t *testing.T) {
			if v, err := r.Call(ctx, "my-api.p", nil); err != nil || v != "inner" {
				t.Errorf("Call: got %v %v, want the context of the inner observer", v, err)
			}
		}, nested("ok")},
		{"a call the provider fails", func(t *testing.T) {
			if _, err := r.Call(ctx, "my_api.p", map[string]any{"fail": true}); !errors.Is(err, utcp.ErrTransport) {
				t.Errorf("Call: got %v, want ErrTransport", err)
			}
		}, nested("transport")},
		{"arguments the schema refuses", func(t *testing.T) {
			if _, err := r.Call(ctx, "my_api.p", map[string]any{"other": 1}); !errors.Is(err, manual.ErrInvalidArguments) {
				t.Errorf("Call: got %v, want ErrInvalidArguments", err)
			}
		}, nested("invalid-arguments")},
		{"a name the registry does not hold", func(t *testing.T) {
			if _, err := r.Call(ctx, "nobody.p", nil); !errors.Is(err, utcp.ErrNotFound) {
				t.Errorf("Call: got %v, want ErrNotFound", err)
			}
			if _, err := r.CallStream(ctx, "nobody.p", nil); !errors.Is(err, utcp.ErrNotFound) {
				t.Errorf("CallStream: got %v, want ErrNotFound", err)
			}
		}, nil},
		{"a stream read to its end, then closed", func(t *testing.T) {
			st, err := r.CallStream(ctx, "my_api.p", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Next(); err != nil {
				t.Fatal(err)
			}
			if got := log.take(); !slices.Equal(got, nested("ok")[:2]) {
				t.Errorf("while the stream runs: got %q, want only the starts", got)
			}
			for range 2 {
				if _, err := st.Next(); err != io.EOF {
					t.Fatalf("Next: got %v, want io.EOF", err)
				}
			}
			log.add("drained")
			_ = st.Close()
		}, append(nested("ok")[2:], "drained")},
		{"a stream closed early", func(t *testing.T) {
			st, err := r.CallStream(ctx, "my_api.p", nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Close()
			_ = st.Close()
		}, nested("ok")},
		{"a stream that breaks", func(t *testing.T) {
			st, err := r.CallStream(ctx, "my_api.p", map[string]any{"fail": true})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = st.Next()
			if _, err := st.Next(); !errors.Is(err, utcp.ErrTransport) {
				t.Errorf("Next: got %v, want ErrTransport", err)
			}
			_ = st.Close()
		}, nested("transport")},
		{"a stream refused before it starts", func(t *testing.T) {
			if _, err := r.CallStream(ctx, "my_api.p", map[string]any{"other": 1}); !errors.Is(err, manual.ErrInvalidArguments) {
				t.Errorf("CallStream: got %v, want ErrInvalidArguments", err)
			}
		}, nested("invalid-arguments")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log.take()
			tc.run(t)
			if got := log.take(); !slices.Equal(got, tc.want) {
				t.Errorf("observers were told %q, want %q", got, tc.want)
			}
		})
	}
}
