package scripted_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/exprd/exprd/model/scripted"
)

// mathTool is a math tool as CodeMode's prompt shows it and as an agent
// turn declares it.
var mathTools = []struct{ name, desc, in, out string }{
	{"math.add", "Adds two numbers: a + b.", `{"type":"object","required":["a","b"],"properties":{"a":{"type":"number"},"b":{"type":"number"}}}`, `{"type":"object","properties":{"result":{"type":"number"}}}`},
	{"math.multiply", "Multiplies two numbers: a × b.", `{"type":"object","required":["a","b"],"properties":{"a":{"type":"number"},"b":{"type":"number"}}}`, `{"type":"object","properties":{"result":{"type":"number"}}}`},
	{"math.sqrt", "The square root of a.", `{"type":"object","required":["a"],"properties":{"a":{"type":"number"}}}`, `{"type":"object","properties":{"result":{"type":"number"}}}`},
	{"catalog.search", "Finds products whose name contains the query: {query}.", `{"type":"object","required":["query"],"properties":{"query":{"type":"string"}}}`, `{}`},
}

// codeModePrompt is a system prompt as CodeMode writes one.
func codeModePrompt() string {
	var sb strings.Builder
	sb.WriteString("You write programs in Expr that call tools.\n- codemode.CallTool(name, args) calls a tool.\n\n# Tools\n")
	for _, t := range mathTools {
		sb.WriteString("\n## " + t.name + "\n" + t.desc + "\nInput schema: " + t.in + "\nOutput schema: " + t.out + "\n")
	}
	return sb.String()
}

// TestDemoFollowsTheRequest: the demo model plans CodeMode requests over
// the offered tools, calls the declared tool that matches an agent
// turn's message, answers with its result, and says so when nothing
// matches.
func TestDemoFollowsTheRequest(t *testing.T) {
	t.Parallel()
	srv, err := scripted.Demo()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := client(t)
	var declared []any
	for _, tool := range mathTools {
		declared = append(declared, map[string]any{"type": "function", "function": map[string]any{
			"name": tool.name, "description": tool.desc, "parameters": json.RawMessage(tool.in)}})
	}
	for _, tt := range []struct {
		name     string
		body     map[string]any
		text     string // the reply's text, whole
		call     string // "name arguments", or ""
		contains string // a part of the text, when text is ""
	}{
		{
			name: "a CodeMode plan of two steps, the second taking the first's result",
			body: map[string]any{"model": "m", "messages": []any{
				map[string]any{"role": "system", "content": codeModePrompt()},
				map[string]any{"role": "user", "content": "add 5 and 7, then multiply the sum by 3"}}},
			text: `{"code":"let r1 = codemode.CallTool(\"math.add\", {\"a\": 5, \"b\": 7});\ncodemode.CallTool(\"math.multiply\", {\"a\": codemode.Get(r1, \"result\"), \"b\": 3})","stream":false,"tools":["math.add","math.multiply"]}`,
		},
		{
			name: "a CodeMode plan with a quoted word",
			body: map[string]any{"model": "m", "messages": []any{
				map[string]any{"role": "system", "content": codeModePrompt()},
				map[string]any{"role": "user", "content": `find the products named "mug"`}}},
			text: `{"code":"codemode.CallTool(\"catalog.search\", {\"query\": \"mug\"})","stream":false,"tools":["catalog.search"]}`,
		},
		{
			name: "nothing to plan",
			body: map[string]any{"model": "m", "messages": []any{
				map[string]any{"role": "system", "content": codeModePrompt()},
				map[string]any{"role": "user", "content": "tell me a joke"}}},
			text: `{"handled": false, "tools": [], "code": ""}`,
		},
		{
			name: "an agent turn calls the declared tool that matches",
			body: map[string]any{"model": "m", "tools": declared, "messages": []any{
				map[string]any{"role": "user", "content": "What is 2 plus 3?"}}},
			text: "I'll call math.add.", call: `math.add {"a":2,"b":3}`,
		},
		{
			name: "then answers with the result",
			body: map[string]any{"model": "m", "tools": declared, "messages": []any{
				map[string]any{"role": "user", "content": "What is 2 plus 3? Add them with math."},
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
					"function": map[string]any{"name": "math.add", "arguments": `{"a":2,"b":3}`}}}},
				map[string]any{"role": "tool", "tool_call_id": "c1", "content": `{"result":5}`}}},
			text: `The result of math.add is {"result":5}.`,
		},
		{
			name: "nothing declared matches",
			body: map[string]any{"model": "m", "tools": declared, "messages": []any{
				map[string]any{"role": "user", "content": "book me a flight"}}},
			contains: "None of my tools (math.add, math.multiply, math.sqrt, catalog.search) matches",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r struct {
				Choices []struct {
					Message struct {
						Content   string
						ToolCalls []struct {
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
				}
			}
			if err := json.Unmarshal([]byte(readAll(t, post(t, c, srv.BaseURL(), tt.body))), &r); err != nil {
				t.Fatal(err)
			}
			m := r.Choices[0].Message
			if tt.text != "" && m.Content != tt.text {
				t.Errorf("text: got %s, want %s", m.Content, tt.text)
			}
			if tt.contains != "" && !strings.Contains(m.Content, tt.contains) {
				t.Errorf("text: got %q, want it to contain %q", m.Content, tt.contains)
			}
			var call string
			if len(m.ToolCalls) > 0 {
				call = m.ToolCalls[0].Function.Name + " " + m.ToolCalls[0].Function.Arguments
			}
			if call != tt.call {
				t.Errorf("call: got %q, want %q", call, tt.call)
			}
		})
	}
}
