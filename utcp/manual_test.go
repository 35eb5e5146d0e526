package utcp_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
)

func TestSanitizeManualName(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"demo-shop":   "demo_shop",
		"demo_shop":   "demo_shop",
		"My API v2.1": "My_API_v2_1",
		"café":        "caf_",
		"emoji🙂":      "emoji__",
	}
	for in, want := range cases {
		if got := utcp.SanitizeManualName(in); got != want {
			t.Errorf("SanitizeManualName(%q): got %q, want %q", in, got, want)
		}
	}
}

func TestRegisterNamesAndPrefixes(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t)
	manual := `{"utcp_version": "1.0.1", "tools": [
		{"name": "add", "tool_call_template": {"call_template_type": "http", "url": "https://a.example/add"}},
		{"name": "demo_shop.list", "tool_call_template": {"call_template_type": "http", "url": "https://a.example/list"}}]}`
	reg := utcptest.Register(t, r, "demo-shop", manual)
	if want := []string{"demo_shop.add", "demo_shop.list"}; reg.Manual != "demo_shop" || !reflect.DeepEqual(reg.Tools, want) {
		t.Errorf("registration: got %s %v, want demo_shop %v", reg.Manual, reg.Tools, want)
	}
	_, err := r.Call(context.Background(), "add", nil)
	var nf *utcp.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("calling add without its prefix: got %v, want *NotFoundError", err)
	}
	if len(nf.Similar) == 0 || nf.Similar[0] != "demo_shop.add" {
		t.Errorf("similar names: got %v, want demo_shop.add first", nf.Similar)
	}
	_, err = r.Register(context.Background(), "demo_shop", utcp.FromText(manual).AllowProtocols("http"))
	var ae *utcp.AlreadyExistsError
	if !errors.As(err, &ae) || !errors.Is(err, utcp.ErrAlreadyExists) || ae.Kind != "manual" || ae.Name != "demo_shop" {
		t.Errorf("registering the same name twice: got %v, want *AlreadyExistsError for manual demo_shop", err)
	}
}

func TestRegisterIsAllOrNothing(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t)
	manual := `{"utcp_version": "1.0.1", "tools": [
		{"name": "a", "tool_call_template": {"call_template_type": "http", "url": "https://x.example/a"}},
		{"name": "b", "tool_call_template": {"call_template_type": "http", "url": "https://x.example/b"}},
		{"name": "c", "tool_call_template": {"call_template_type": "http", "url": "https://x.example/c"}},
		{"name": "d", "tool_call_template": {"call_template_type": "http", "http_method": "GET"}}]}`
	_, err := r.Register(context.Background(), "shop", utcp.FromText(manual).AllowProtocols("http"))
	if err == nil || err.Error() != `manual "shop": tools[3].tool_call_template.url: missing` {
		t.Fatalf("got %v, want the path of the missing url", err)
	}
	if got := len(r.List()); got != 0 {
		t.Errorf("tools registered: got %d, want 0", got)
	}
	if got := r.Manuals(); len(got) != 0 {
		t.Errorf("manuals: got %v, want none", got)
	}
}

func TestRegisterRefusesBadTemplateFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tmpl string
		want string
	}{
		{`{"call_template_type": "http", "url": "https://a", "http_method": "TRACE"}`, `tools[0].tool_call_template.http_method: must be one of GET, POST, PUT, DELETE, PATCH, got "TRACE"`},
		{`{"call_template_type": "http", "url": "https://a", "headers": {"X": 1}}`, `tools[0].tool_call_template.headers.X: must be a string, got number`},
		{`{"call_template_type": "http", "url": "https://a", "header_fields": "X"}`, `tools[0].tool_call_template.header_fields: must be an array, got string`},
		{`{"call_template_type": "streamable_http", "url": "https://a", "http_method": "PUT"}`, `tools[0].tool_call_template.http_method: must be one of GET, POST, got "PUT"`},
		{`{"call_template_type": "streamable_http", "url": "https://a", "chunk_size": 0}`, `tools[0].tool_call_template.chunk_size: must be in [1, 1048576]`},
		{`{"call_template_type": "mcp", "url": "https://a"}`, `tools[0].tool_call_template.config: missing`},
		{`{"call_template_type": "mcp", "config": {"mcpServers": {"s": {"transport": "stdio", "command": "sh"}}}}`, `tools[0].tool_call_template.config.mcpServers.s.transport: a stdio MCP server runs a process on exprd's host: only the operator may configure one`},
		{`{"call_template_type": "magic", "url": "https://a"}`, `tools[0].tool_call_template.call_template_type: no transport for type "magic"`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			r := utcptest.NewRegistry(t)
			manual := `{"utcp_version": "1", "tools": [{"name": "x", "tool_call_template": ` + tc.tmpl + `}]}`
			_, err := r.Register(context.Background(), "m", utcp.FromText(manual).AllowProtocols("http", "streamable_http", "mcp", "magic"))
			if err == nil || !strings.HasPrefix(err.Error(), `manual "m": `+tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAllowedProtocols(t *testing.T) {
	t.Parallel()
	httpTools := `{"utcp_version": "1.0.1", "tools": [
		{"name": "a", "tool_call_template": {"call_template_type": "http", "url": "https://x.example/a"}},
		{"name": "b", "tool_call_template": {"call_template_type": "sse", "url": "https://x.example/b"}}]}`
	t.Run("an inline manual of http tools without the list is refused, saying why", func(t *testing.T) {
		t.Parallel()
		r := utcptest.NewRegistry(t)
		_, err := r.Register(context.Background(), "inline", utcp.FromText(httpTools))
		want := `manual "inline": all 2 tools were filtered out by allowed_communication_protocols [text]: they use [http, sse]; list those types to register them`
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	})
	t.Run("the template's own list", func(t *testing.T) {
		t.Parallel()
		r := utcptest.NewRegistry(t)
		tmpl := `{"name": "inline", "call_template_type": "text", "allowed_communication_protocols": ["http"], "content": ` + quote(httpTools) + `}`
		reg, err := r.Register(context.Background(), "", utcp.FromTemplate([]byte(tmpl)))
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		if !reflect.DeepEqual(reg.Tools, []string{"inline.a"}) || len(reg.Skipped) != 1 || reg.Skipped[0].Name != "b" {
			t.Errorf("got tools %v skipped %v, want inline.a registered and b skipped", reg.Tools, reg.Skipped)
		}
	})
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestRegisterFromManualAndFile(t *testing.T) {
	t.Parallel()
	m, err := manual.Parse([]byte(utcptest.ManualOf("add", nil, map[string]any{"call_template_type": "http", "url": "https://calc.example/add"})))
	if err != nil {
		t.Fatal(err)
	}
	r := utcptest.NewRegistry(t, utcptest.EveryVariable)
	if _, err := r.Register(context.Background(), "calc", utcp.FromManual(m)); err != nil {
		t.Fatalf("FromManual: %v", err)
	}
	if m.Tools[0].Name != "add" {
		t.Errorf("the caller's manual was changed: tool name %q", m.Tools[0].Name)
	}
	reg, err := r.Register(context.Background(), "", utcp.FromFile("testdata/manuals/weather.json"))
	if err != nil {
		t.Fatalf("FromFile: %v", err)
	}
	if reg.Manual != "weather" || len(reg.Tools) == 0 {
		t.Errorf("got %s %v, want the weather manual", reg.Manual, reg.Tools)
	}
	if err := r.Deregister("weather"); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	if err := r.Deregister("weather"); !errors.Is(err, utcp.ErrNotFound) {
		t.Errorf("Deregister twice: got %v, want ErrNotFound", err)
	}
	if _, err := os.Stat("testdata/manuals/weather.json"); err != nil {
		t.Fatal(err)
	}
}
