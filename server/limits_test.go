package server_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
)

// TestBudgetAboveMaximumMessage is the regression test for budget errors
// that gave durations in nanoseconds: every field of the proto's Budgets,
// one past the server's maximum (the default maxima; at the maximum is
// TestBudgetsLower's), is refused with INVALID_ARGUMENT naming the field as
// the proto does, in the field's own unit, by Call and by Session alike.
func TestBudgetAboveMaximumMessage(t *testing.T) {
	t.Parallel()
	want := map[protoreflect.Name]struct {
		value uint64
		msg   string
	}{
		"timeout_ms":          {1000, "budget timeout_ms: 1000 ms is above the server's maximum of 100 ms"},
		"max_iterations":      {1_000_001, "budget max_iterations: 1000001 iterations is above the server's maximum of 1000000 iterations"},
		"memory_budget":       {1_000_001, "budget memory_budget: 1000001 is above the server's maximum of 1000000"},
		"max_source_length":   {8001, "budget max_source_length: 8001 characters is above the server's maximum of 8000 characters"},
		"max_nodes":           {2001, "budget max_nodes: 2001 nodes is above the server's maximum of 2000 nodes"},
		"max_string_length":   {100_001, "budget max_string_length: 100001 characters is above the server's maximum of 100000 characters"},
		"max_array_length":    {100_001, "budget max_array_length: 100001 items is above the server's maximum of 100000 items"},
		"max_read_chars":      {8001, "budget max_read_chars: 8001 characters is above the server's maximum of 8000 characters"},
		"function_timeout_ms": {10_001, "budget function_timeout_ms: 10001 ms is above the server's maximum of 10000 ms"},
		"max_steps":           {51, "budget max_steps: 51 steps is above the server's maximum of 50 steps"},
		"max_value_bytes":     {8<<20 + 1, "budget max_value_bytes: 8388609 bytes is above the server's maximum of 8388608 bytes"},
		"max_alloc_bytes":     {64<<20 + 1, "budget max_alloc_bytes: 67108865 bytes is above the server's maximum of 67108864 bytes"},
		"max_function_calls":  {65, "budget max_function_calls: 65 calls is above the server's maximum of 64 calls"},
	}
	c := startServer(t)
	fields := (&exprdv1.Budgets{}).ProtoReflect().Descriptor().Fields()
	if fields.Len() != len(want) {
		t.Errorf("Budgets has %d fields, the test %d: add the new ones", fields.Len(), len(want))
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		t.Run(string(fd.Name()), func(t *testing.T) {
			t.Parallel()
			tt, ok := want[fd.Name()]
			if !ok {
				t.Fatalf("no case for Budgets.%s", fd.Name())
			}
			b := &exprdv1.Budgets{}
			switch fd.Kind() {
			case protoreflect.Uint32Kind:
				b.ProtoReflect().Set(fd, protoreflect.ValueOfUint32(uint32(tt.value)))
			case protoreflect.Uint64Kind:
				b.ProtoReflect().Set(fd, protoreflect.ValueOfUint64(tt.value))
			default:
				t.Fatalf("Budgets.%s is %v: the test knows uint32 and uint64", fd.Name(), fd.Kind())
			}
			_, err := c.Call(context.Background(), &exprdv1.CallRequest{Budgets: b, StateJson: `{}`, InputJson: `{"steps": []}`})
			checkBudgetError(t, "Call", err, tt.msg)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := c.Session(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{Budgets: b}}})
			_, err = s.Recv()
			checkBudgetError(t, "Session", err, tt.msg)
		})
	}
}

func checkBudgetError(t *testing.T, rpc string, err error, want string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !strings.HasSuffix(st.Message(), want) {
		t.Errorf("%s: got %v, want InvalidArgument %q", rpc, err, want)
		return
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
			if v := br.GetFieldViolations()[0]; v.GetField() != "budgets" || v.GetDescription() != want {
				t.Errorf("%s: got BadRequest %s: %q, want budgets: %q", rpc, v.GetField(), v.GetDescription(), want)
			}
			return
		}
	}
	t.Errorf("%s: got details %v, want one BadRequest", rpc, st.Details())
}

// sized returns the message build(n) for the n that makes it exactly size
// bytes on the wire.
func sized[M proto.Message](t *testing.T, size int, build func(n int) M) M {
	t.Helper()
	n := size - proto.Size(build(0))
	for proto.Size(build(n)) > size {
		n--
	}
	for proto.Size(build(n)) < size {
		n++
	}
	if m := build(n); proto.Size(m) == size {
		return m
	}
	t.Fatalf("no message of exactly %d bytes", size)
	panic("unreachable")
}

// TestMaxRecvMsgSizeHasNoDetail pins what --max-recv-msg-size does, as the
// docs now say: grpc-go refuses a message one byte past it with its own
// ResourceExhausted, which carries no QuotaFailure (it runs before exprd's
// interceptors); a message of exactly the limit passes. On a Session the
// error ends the stream.
func TestMaxRecvMsgSizeHasNoDetail(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	c := startServer(t, server.WithMaxRecvMsgSize(limit))
	call := func(t *testing.T, size int) *exprdv1.CallRequest {
		return sized(t, size, func(n int) *exprdv1.CallRequest {
			return &exprdv1.CallRequest{InputJson: `{"steps": []}`, StateJson: `{"p": "` + strings.Repeat("x", max(n, 0)) + `"}`}
		})
	}
	state := func(t *testing.T, size int) *exprdv1.SessionRequest {
		return sized(t, size, func(n int) *exprdv1.SessionRequest {
			return &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_State{State: &exprdv1.State{StateJson: `{"p": "` + strings.Repeat("x", max(n, 0)) + `"}`}}}
		})
	}
	for _, tt := range []struct {
		name string
		rpc  func(t *testing.T) error
		ok   bool
	}{
		{"Call at the limit", func(t *testing.T) error { _, err := c.Call(context.Background(), call(t, limit)); return err }, true},
		{"Call one past", func(t *testing.T) error { _, err := c.Call(context.Background(), call(t, limit+1)); return err }, false},
		{"Session state at the limit", func(t *testing.T) error {
			s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}})
			s.send(state(t, limit))
			if got := s.read("len(scopes.root.p)"); !strings.HasPrefix(got, `{"value":`) {
				t.Errorf("read after the state: got %s, want its value", got)
			}
			return nil
		}, true},
		{"Session state one past", func(t *testing.T) error {
			s := openSession(t, c, &exprdv1.Open{})
			s.send(state(t, limit+1))
			_, err := s.stream.Recv()
			return err
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.rpc(t)
			if tt.ok {
				if err != nil {
					t.Errorf("got %v, want it to pass", err)
				}
				return
			}
			st := status.Convert(err)
			if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") || len(st.Details()) != 0 {
				t.Errorf("got %v with details %v, want grpc-go's ResourceExhausted \"received message larger than max\" with none", err, st.Details())
			}
		})
	}
}

// MaxConnsFor gives a connection a server.ConnMemory of the budget, within its
// bounds: at the bounds and one past them.
func TestMaxConnsFor(t *testing.T) {
	for _, tt := range []struct {
		budget int64
		want   int
	}{
		{0, server.DefaultMaxConns},
		{256 << 20, 128},
		{server.MinConns * server.ConnMemory, server.MinConns},
		{server.MinConns*server.ConnMemory - 1, server.MinConns},
		{1, server.MinConns},
		{server.DefaultMaxConns * server.ConnMemory, server.DefaultMaxConns},
		{server.DefaultMaxConns*server.ConnMemory + server.ConnMemory, server.DefaultMaxConns},
		{(server.MinConns + 1) * server.ConnMemory, server.MinConns + 1},
	} {
		if got := server.MaxConnsFor(tt.budget); got != tt.want {
			t.Errorf("MaxConnsFor(%d): got %d, want %d", tt.budget, got, tt.want)
		}
	}
}
