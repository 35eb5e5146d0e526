package codemode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

const promptHead = `You write programs in Expr that call tools, to answer the user's request.

The program's environment has only codemode:
- codemode.CallTool(name, args) calls a tool with an object of arguments and returns its result.
- codemode.CallToolStream(name, args) calls a tool and returns the array of the chunks it streams.
- codemode.Get(value, key) is value[key], or nil when value is not an object or has no such key.
Bind values with let and separate expressions with ;. The last expression is the result. Write tool names as string literals.
No other names, functions or methods exist. You may call only the tools listed below: there are no others.

Answer with one JSON object and nothing else:
{"tools": ["<each tool the code calls>"], "code": "<the Expr program>", "stream": <true exactly when the code calls codemode.CallToolStream>}
When no tool is needed, answer {"handled": false, "tools": [], "code": ""}.

Example:
{"tools": ["math.add", "math.multiply"], "code": "let r1 = codemode.CallTool(\"math.add\", {\"a\": 5, \"b\": 7});\ncodemode.CallTool(\"math.multiply\", {\"a\": codemode.Get(r1, \"result\"), \"b\": 3})", "stream": false}

# Tools
`

// systemPrompt is the closed-world prompt: the rules, the answer format,
// and each candidate's name, description, input and output schema.
func systemPrompt(reg Registry, candidates []string) string {
	var sb strings.Builder
	sb.WriteString(promptHead)
	if len(candidates) == 0 {
		sb.WriteString("\n(none: answer handled false)\n")
	}
	for _, name := range candidates {
		t, err := reg.Tool(name)
		if err != nil {
			continue
		}
		fmt.Fprintf(&sb, "\n## %s\n%s\nInput schema: %s\nOutput schema: %s\n", t.Name, t.Description, compact(t.Inputs), compact(t.Outputs))
	}
	return sb.String()
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// repairPrompt sends a failed plan's error back for the repair round.
func repairPrompt(e *Error) string {
	return "That plan was refused: " + e.Message + "\nAnswer again with the corrected JSON object only."
}
