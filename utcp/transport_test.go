package utcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
)

// echoTransport stands for a transport added from outside the package (as
// the gRPC one will be): it discovers a manual of its own tools and answers
// a call with its arguments.
type echoTransport struct {
	target string
	env    utcp.Env
}

func newEcho(tmpl json.RawMessage, env utcp.Env) (utcp.Transport, error) {
	var f struct {
		Target string `json:"target"`
	}
	if err := json.Unmarshal(tmpl, &f); err != nil {
		return nil, err
	}
	if f.Target == "" {
		return nil, &manual.FieldError{Path: "target", Msg: "missing"}
	}
	return &echoTransport{target: f.Target, env: env}, nil
}

func (e *echoTransport) Discover(context.Context) (*utcp.Document, error) {
	return &utcp.Document{Body: []byte(`{"utcp_version": "1.1.0", "tools": [
		{"name": "echo", "inputs": {"type": "object", "properties": {"say": {"type": "string"}}},
		 "tool_call_template": {"call_template_type": "echo", "target": "` + e.target + `"}},
		{"name": "slow", "tool_call_template": {"call_template_type": "echo", "target": "` + e.target + `", "timeout": 30}}]}`)}, nil
}

func (e *echoTransport) Call(ctx context.Context, t *manual.Tool, args map[string]any) (any, error) {
	if t.Name == "svc.slow" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return map[string]any{"target": e.target, "manual": e.env.Manual, "args": args}, nil
}

func (e *echoTransport) Stream(ctx context.Context, t *manual.Tool, args map[string]any) (utcp.Stream, error) {
	return nil, errors.New("raw text that must not reach a client: dial 10.0.0.7:9339")
}

func TestTransportSeam(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t, utcp.WithTransport("echo", newEcho))
	reg, err := r.Register(context.Background(), "svc", utcp.FromTemplate([]byte(`{"call_template_type": "echo", "target": "127.0.0.1:9339"}`)))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if want := []string{"svc.echo", "svc.slow"}; !reflect.DeepEqual(reg.Tools, want) {
		t.Fatalf("tools: got %v, want %v", reg.Tools, want)
	}
	got, err := r.Call(context.Background(), "svc.echo", map[string]any{"say": "hi"})
	want := map[string]any{"target": "127.0.0.1:9339", "manual": "svc", "args": map[string]any{"say": "hi"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Call: got %v %v, want %v", got, err, want)
	}
	_, err = r.Call(context.Background(), "svc.slow", nil)
	var to *utcp.TimeoutError
	if !errors.As(err, &to) || to.Timeout != 30*time.Millisecond {
		t.Errorf("slow: got %v, want a TimeoutError after the template's 30ms", err)
	}
	_, err = r.CallStream(context.Background(), "svc.echo", nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonFailed || err.Error() != `tool "svc.echo": provider call failed` {
		t.Errorf("foreign error: got %v, want it wrapped without its text", err)
	}
	if _, err := r.Register(context.Background(), "bad", utcp.FromTemplate([]byte(`{"call_template_type": "echo"}`))); err == nil || err.Error() != `manual "bad": target: missing` {
		t.Errorf("a refused field: got %v", err)
	}
	bare, err := utcp.New()
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.Register(context.Background(), "svc", utcp.FromURL("https://a.example/manual")); !errors.Is(err, manual.ErrInvalid) {
		t.Errorf("a registry given no transports: got %v, want ErrInvalidManual (no http transport)", err)
	}
	other := utcptest.NewRegistry(t)
	if _, err := other.Register(context.Background(), "svc", utcp.FromTemplate([]byte(`{"call_template_type": "echo", "target": "x"}`))); !errors.Is(err, manual.ErrInvalid) {
		t.Errorf("a registry without the echo transport: got %v, want ErrInvalidManual", err)
	}
	var _ io.Closer = (*utcp.Registry)(nil)
}

func TestTextToolsCannotBeCalled(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t)
	manual := `{"utcp_version": "1.0.1", "tools": [{"name": "doc", "tool_call_template": {"call_template_type": "text", "content": "{}"}}]}`
	if _, err := r.Register(context.Background(), "inline", utcp.FromText(manual)); err != nil {
		t.Fatalf("Register: %v", err)
	}
	_, err := r.Call(context.Background(), "inline.doc", nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonNotCallable {
		t.Errorf("got %v, want ReasonNotCallable", err)
	}
}
