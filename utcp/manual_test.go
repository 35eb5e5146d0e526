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
)

const goodTool = `{"name": "add", "description": "Add two numbers", "tags": ["math"],
  "inputs": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
  "outputs": {"type": "number"}, "average_response_size": 16,
  "tool_call_template": {"name": "m", "call_template_type": "http", "url": "https://calc.example/add", "http_method": "POST"}}`

func TestParseManualRefusesWithPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		manual string
		want   string // the error message after "utcp: "
	}{
		{"not JSON", `{"tools": [`, "not valid JSON: unexpected end"},
		{"not an object", `[1]`, "a manual must be a JSON object, got array"},
		{"unknown manual key", `{"utcp_version": "1.0.1", "tools": [], "extra": 1}`, "extra: unknown key (allowed: utcp_version, manual_version, tools, version)"},
		{"tools missing", `{"utcp_version": "1.0.1"}`, "tools: missing"},
		{"tools not an array", `{"tools": {}}`, "tools: must be an array, got object"},
		{"tool not an object", `{"tools": ["add"]}`, "tools[0]: a tool must be an object, got string"},
		{"unknown tool key", `{"tools": [` + goodTool + `, {"name": "x", "tool_call_template": {"call_template_type": "http", "url": "https://a"}, "handler": "go"}]}`, "tools[1].handler: unknown key (allowed: name, description, inputs, outputs, tags, average_response_size, tool_call_template, tool_provider, provider, title, annotations)"},
		{"tool name missing", `{"tools": [{"tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].name: missing"},
		{"tool name empty", `{"tools": [{"name": " ", "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].name: must not be empty"},
		{"tool name not a string", `{"tools": [{"name": 3, "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].name: must be a string, got number"},
		{"duplicate tool", `{"tools": [` + goodTool + `,` + goodTool + `]}`, `tools[1].name: "add" is already the name of tools[0]`},
		{"tags not strings", `{"tools": [{"name": "x", "tags": ["a", 1], "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].tags[1]: must be a string, got number"},
		{"negative response size", `{"tools": [{"name": "x", "average_response_size": -3, "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].average_response_size: must be a non-negative integer"},
		{"template missing", `{"tools": [{"name": "x"}]}`, "tools[0].tool_call_template: missing"},
		{"template type missing", `{"tools": [{"name": "x", "tool_call_template": {"url": "https://a"}}]}`, "tools[0].tool_call_template.call_template_type: missing"},
		{"two templates", `{"tools": [{"name": "x", "tool_call_template": {"call_template_type": "http"}, "tool_provider": {"provider_type": "http"}}]}`, "tools[0].tool_provider: a tool has one call template; tool_call_template is already given"},
		{"bad auth type", `{"tools": [{"name": "x", "tool_call_template": {"call_template_type": "http", "url": "https://a", "auth": {"auth_type": "magic"}}}]}`, `tools[0].tool_call_template.auth.auth_type: must be "api_key", "basic" or "oauth2", got "magic"`},
		{"api key missing", `{"tools": [{"name": "x", "tool_call_template": {"call_template_type": "http", "url": "https://a", "auth": {"auth_type": "api_key"}}}]}`, "tools[0].tool_call_template.auth.api_key: missing"},
		{"bad timeout", `{"tools": [{"name": "x", "tool_call_template": {"call_template_type": "http", "url": "https://a", "timeout": -1}}]}`, "tools[0].tool_call_template.timeout: must be a number of milliseconds in (0, 3600000]"},
		{"schema not an object", `{"tools": [{"name": "x", "inputs": "object", "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].inputs: a JSON Schema must be an object or a boolean, got string"},
		{"schema does not compile", `{"tools": [{"name": "x", "outputs": {"type": "integr"}, "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].outputs: invalid JSON Schema"},
		{"schema with a remote ref", `{"tools": [{"name": "x", "inputs": {"$ref": "https://evil.example/s.json"}, "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].inputs: invalid JSON Schema"},
		{"schema with a file ref", `{"tools": [{"name": "x", "inputs": {"$ref": "file:///etc/passwd"}, "tool_call_template": {"call_template_type": "http", "url": "https://a"}}]}`, "tools[0].inputs: invalid JSON Schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := utcp.ParseManual([]byte(tc.manual))
			var me *utcp.ManualError
			if !errors.As(err, &me) {
				t.Fatalf("got %v, want *ManualError", err)
			}
			if !errors.Is(err, utcp.ErrInvalidManual) {
				t.Errorf("errors.Is(err, ErrInvalidManual): got false, want true")
			}
			if got := strings.TrimPrefix(err.Error(), "utcp: "); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start with %q", got, tc.want)
			}
		})
	}
}

func TestParseManualReadsAllFields(t *testing.T) {
	t.Parallel()
	m, err := utcp.ParseManual([]byte(`{"utcp_version": "1.1.0", "manual_version": "2.3.0", "tools": [` + goodTool + `]}`))
	if err != nil {
		t.Fatalf("ParseManual: %v", err)
	}
	if m.UTCPVersion != "1.1.0" || m.ManualVersion != "2.3.0" {
		t.Errorf("versions: got %s %s, want 1.1.0 2.3.0", m.UTCPVersion, m.ManualVersion)
	}
	tool := m.Tools[0]
	if tool.Name != "add" || tool.Description != "Add two numbers" || !reflect.DeepEqual(tool.Tags, []string{"math"}) {
		t.Errorf("tool: got %q %q %v", tool.Name, tool.Description, tool.Tags)
	}
	if tool.AverageResponseSize == nil || *tool.AverageResponseSize != 16 {
		t.Errorf("average_response_size: got %v, want 16", tool.AverageResponseSize)
	}
	if tool.Template.Type != "http" || tool.Template.Name != "m" {
		t.Errorf("template: got %s %s, want http m", tool.Template.Type, tool.Template.Name)
	}
	if got, want := tool.InputProperties(), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("input properties: got %v, want %v", got, want)
	}
	if err := tool.ValidateArgs(map[string]any{"a": 1, "b": "two"}); !errors.Is(err, utcp.ErrInvalidArguments) {
		t.Errorf("ValidateArgs with a string b: got %v, want ErrInvalidArguments", err)
	}
}

func TestParseManualDefaults(t *testing.T) {
	t.Parallel()
	m, err := utcp.ParseManual([]byte(`{"tools": [{"name": "x", "tool_call_template": {"call_template_type": "http", "url": "https://a", "surprise": 1}}]}`))
	if err != nil {
		t.Fatalf("ParseManual: %v (unknown template keys must be dropped, not refused)", err)
	}
	if m.UTCPVersion != utcp.DefaultUTCPVersion || m.ManualVersion != utcp.DefaultManualVersion {
		t.Errorf("versions: got %s %s, want the defaults", m.UTCPVersion, m.ManualVersion)
	}
	if got := string(m.Tools[0].Inputs); got != "{}" {
		t.Errorf("inputs: got %s, want {}", got)
	}
}

func TestParseManualOlderGoUTCPForm(t *testing.T) {
	t.Parallel()
	m, err := utcp.ParseManual([]byte(`{"version": "1.0", "tools": [
		{"name": "echo", "description": "Echo", "inputs": {"type": "object"}, "outputs": {"type": "object"}, "tags": [],
		 "tool_provider": {"name": "old", "provider_type": "http", "url": "https://old.example/echo", "http_method": "POST"}},
		{"name": "ping", "provider": {"provider_type": "http", "url": "https://old.example/ping"}}]}`))
	if err != nil {
		t.Fatalf("ParseManual: %v", err)
	}
	if m.UTCPVersion != "1.0" {
		t.Errorf("version: got %s, want 1.0", m.UTCPVersion)
	}
	for i, tool := range m.Tools {
		if tool.Template.Type != "http" {
			t.Errorf("tools[%d] type: got %q, want http", i, tool.Template.Type)
		}
		if !strings.Contains(string(tool.Template.JSON()), `"call_template_type":"http"`) {
			t.Errorf("tools[%d] template JSON: got %s, want call_template_type set", i, tool.Template.JSON())
		}
	}
}

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
	m, err := utcp.ParseManual([]byte(`{"utcp_version": "1.0.1", "tools": [` + goodTool + `]}`))
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
