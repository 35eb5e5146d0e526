package manual_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/manual"
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
			_, err := manual.Parse([]byte(tc.manual))
			var me *manual.Error
			if !errors.As(err, &me) {
				t.Fatalf("got %v, want *ManualError", err)
			}
			if !errors.Is(err, manual.ErrInvalid) {
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
	m, err := manual.Parse([]byte(`{"utcp_version": "1.1.0", "manual_version": "2.3.0", "tools": [` + goodTool + `]}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
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
	if err := tool.ValidateArgs(map[string]any{"a": 1, "b": "two"}); !errors.Is(err, manual.ErrInvalidArguments) {
		t.Errorf("ValidateArgs with a string b: got %v, want ErrInvalidArguments", err)
	}
}

func TestParseManualDefaults(t *testing.T) {
	t.Parallel()
	m, err := manual.Parse([]byte(`{"tools": [{"name": "x", "tool_call_template": {"call_template_type": "http", "url": "https://a", "surprise": 1}}]}`))
	if err != nil {
		t.Fatalf("Parse: %v (unknown template keys must be dropped, not refused)", err)
	}
	if m.UTCPVersion != manual.DefaultUTCPVersion || m.ManualVersion != manual.DefaultManualVersion {
		t.Errorf("versions: got %s %s, want the defaults", m.UTCPVersion, m.ManualVersion)
	}
	if got := string(m.Tools[0].Inputs); got != "{}" {
		t.Errorf("inputs: got %s, want {}", got)
	}
}

func TestParseManualOlderGoUTCPForm(t *testing.T) {
	t.Parallel()
	m, err := manual.Parse([]byte(`{"version": "1.0", "tools": [
		{"name": "echo", "description": "Echo", "inputs": {"type": "object"}, "outputs": {"type": "object"}, "tags": [],
		 "tool_provider": {"name": "old", "provider_type": "http", "url": "https://old.example/echo", "http_method": "POST"}},
		{"name": "ping", "provider": {"provider_type": "http", "url": "https://old.example/ping"}}]}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
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
