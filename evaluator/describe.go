package evaluator

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ToolName is the tool's name as the model sees it.
const ToolName = "expr"

// Description is what Describe renders for a session's settings.
type Description struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// CorePrompt is the system-prompt partial on steps and the Expr language.
	CorePrompt string
	// FunctionsPrompt is the system-prompt partial for the session's
	// functions: "# Available Functions", "# Function Details", "# Shared
	// Types".
	FunctionsPrompt string
}

// Describe renders the tool and the system-prompt partials for t.
func (t *Tool) Describe() Description {
	s := t.settings
	var d strings.Builder
	d.WriteString(toolRules)
	if s.Read {
		fmt.Fprintf(&d, readRules, characters(t.budgets.MaxReadChars))
	}
	if s.HasToolFunctions {
		d.WriteString("\n## Functions\n\nThese functions replace the ones in the system prompt for this tool.\n\n")
		if len(s.ToolFunctions) == 0 {
			d.WriteString("This tool calls no functions.\n")
		} else {
			d.WriteString(renderFunctions(t.toolFunctions(), "##"))
		}
	}
	if s.Note != "" {
		d.WriteString("\n## Note\n\n")
		d.WriteString(strings.TrimSpace(s.Note))
		d.WriteString("\n")
	}
	return Description{
		Name:            ToolName,
		Description:     d.String(),
		InputSchema:     InputSchema(s.Read, t.budgets.MaxSteps, t.budgets.MaxReadChars),
		OutputSchema:    OutputSchema(s.Read),
		CorePrompt:      corePrompt,
		FunctionsPrompt: renderFunctions(s.Functions, "#"),
	}
}

// toolFunctions resolves the tool's own functions, name-only entries to the
// session's.
func (t *Tool) toolFunctions() []Function {
	var out []Function
	for _, f := range t.settings.ToolFunctions {
		if cf, ok := t.funcs[f.Name]; ok {
			out = append(out, cf.Function)
		}
	}
	return out
}

// InputSchema is the tool's input JSON Schema: without "read" when read is
// off, so a model is never told of it. maxSteps is the steps' maxItems;
// maxReadChars is the read limit its description states.
func InputSchema(read bool, maxSteps, maxReadChars int) json.RawMessage {
	step := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"expr"},
		"properties": map[string]any{
			"set":     map[string]any{"type": "string", "description": "Where to write the value: a path under scopes.root, e.g. scopes.root.selected or scopes.root.items[3].name. Leave it out to run the expression for its effect."},
			"expr":    map[string]any{"type": "string", "minLength": 1, "description": "An Expr expression over scopes.root and the functions."},
			"confirm": map[string]any{"type": "string", "minLength": 1, "description": "A question the user must accept before this step runs."},
		},
	}
	props := map[string]any{
		"steps": map[string]any{"type": "array", "maxItems": maxSteps, "items": step, "description": "Steps run in order; each sees the writes of the ones before it."},
	}
	schema := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"additionalProperties": false,
		"properties":           props,
	}
	if read {
		props["read"] = map[string]any{"type": "string", "minLength": 1, "description": "An expression whose JSON value is the answer (at most " + characters(maxReadChars) + ")."}
		schema["anyOf"] = []any{map[string]any{"required": []string{"steps"}}, map[string]any{"required": []string{"read"}}}
	} else {
		schema["required"] = []string{"steps"}
	}
	b, _ := json.Marshal(schema)
	return b
}

// OutputSchema is the JSON Schema of an answer.
func OutputSchema(read bool) json.RawMessage {
	reasons := make([]string, len(Reasons))
	for i, r := range Reasons {
		reasons[i] = string(r)
	}
	shapes := []any{
		map[string]any{"type": "object", "additionalProperties": false, "description": "The steps ran."},
		map[string]any{"type": "object", "additionalProperties": false, "required": []string{"declined"},
			"properties": map[string]any{"declined": map[string]any{"const": true}}, "description": "The user declined a confirm: that step and the ones after it did not run."},
		map[string]any{"type": "object", "additionalProperties": false, "required": []string{"error"},
			"properties": map[string]any{"error": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"reason", "message"},
				"properties": map[string]any{
					"reason":  map[string]any{"enum": reasons},
					"message": map[string]any{"type": "string"},
				},
			}}, "description": "Fix the call and try again."},
	}
	if read {
		shapes = append(shapes, map[string]any{"type": "object", "additionalProperties": false, "required": []string{"value"},
			"properties": map[string]any{"value": map[string]any{}}, "description": "The JSON value of read."})
	}
	b, _ := json.Marshal(map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"oneOf":   shapes,
	})
	return b
}

const toolRules = `Change the UI's state with Expr expressions. The state is scopes.root; nothing else is reachable.

Send {"steps": [...]}. Steps run in order, and each sees the writes of the ones before it. A step is:
- "expr": an Expr expression over scopes.root and the functions;
- "set" (optional): a path under scopes.root where its value is written, e.g. scopes.root.selected or scopes.root.items[3].name; without it the step runs for its effect, such as a function call;
- "confirm" (optional): a question the user must accept before the step runs. If the user declines, the answer is {"declined": true} and that step and the ones after it do not run; earlier writes stay.

The whole call is checked before any step runs: a bad path, a parse or type error, or an unknown name or function runs nothing.
Answers: {} when the steps ran; {"error": {"reason": ..., "message": ...}} to fix and retry.
`

// readRules is a format: %s is the read limit, from characters.
const readRules = `
Add "read": an expression whose JSON value is the answer, {"value": ...}, at most %s. Read only what you need.
`

// characters renders a limit in characters as the prompts write it:
// "8,000 characters", "1 character".
func characters(n int) string {
	if n == 1 {
		return "1 character"
	}
	return thousands(n) + " characters"
}

// thousands renders n with commas between groups of three digits, as the
// prompts write numbers: 8000 → "8,000".
func thousands(n int) string {
	s := strconv.Itoa(n)
	start := 0
	if n < 0 {
		start = 1
	}
	var b strings.Builder
	for i, c := range s {
		if i > start && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

const corePrompt = `# The expr tool

The expr tool changes the UI's state with Expr expressions. The state is the JSON object scopes.root; read it with dots and brackets (scopes.root.products.items[0].price), write it with a step's "set".

## Steps

A call is {"steps": [{"set": PATH, "expr": EXPR, "confirm": TEXT}, ...]}. Steps run in order; each sees what the earlier ones wrote. "set" and "confirm" are optional. A step without "set" runs for its effect (a function call). A step with "confirm" runs only if the user accepts.

## The Expr language

- Literals: 1, 2.5, "text", true, nil, [1, 2], {id: 1, name: "a"}.
- Operators: + - * / % ** == != < <= > >= and or not in matches contains startsWith endsWith; x ?? default; cond ? a : b; a..b ranges.
- Arrays: items[0], items[-1], items[1:3], len(items).
- Predicates take # (or .field) for the current item: filter(items, .price < 10), map(items, .name), all, any, none, one, count, sum(items, .price), find, findIndex, groupBy, sortBy(items, .price), reduce(items, #acc + .price, 0).
- Helpers: keys, values, fromPairs, toPairs, first, last, take, reverse, uniq, concat, flatten, min, max, mean, median, abs, round, floor, ceil, upper, lower, trim, split, join, replace, indexOf, string, int, float, toJSON, fromJSON, now(), date().
- Names: let x = ...; x + 1. Pipes: items | filter(.active) | map(.id).
- A map literal as a predicate body needs parentheses, or it reads as a closure: map(items, ({id: .id, price: .price})).

## Examples

Select the five lowest-priced products:
{"steps": [{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}]}

Rename one item, then clear the filter:
{"steps": [{"set": "scopes.root.items[2].name", "expr": "\"Blue mug\""}, {"set": "scopes.root.filter", "expr": "\"\""}]}

Ask before deleting, then keep the rest:
{"steps": [{"confirm": "Remove the 3 discontinued products?", "set": "scopes.root.products.items", "expr": "filter(scopes.root.products.items, !.discontinued)"}]}
`

// renderFunctions writes the functions partial at heading level h ("#" for
// the system prompt, "##" inside the tool's description).
func renderFunctions(fns []Function, h string) string {
	if len(fns) == 0 {
		return ""
	}
	fns = append([]Function(nil), fns...)
	sort.Slice(fns, func(i, j int) bool { return fns[i].Name < fns[j].Name })
	var b strings.Builder
	fmt.Fprintf(&b, "%s Available Functions\n\n", h)
	for _, f := range fns {
		fmt.Fprintf(&b, "- %s(args): %s\n", f.Name, firstLine(f.Description))
	}
	fmt.Fprintf(&b, "\n%s Function Details\n", h)
	shared := map[string]json.RawMessage{}
	for _, f := range fns {
		fmt.Fprintf(&b, "\n%s# %s\n\n", h, f.Name)
		if f.Description != "" {
			b.WriteString(strings.TrimSpace(f.Description))
			b.WriteString("\n\n")
		}
		if f.Runner == RunClient {
			b.WriteString("Runs in the user's app; the call waits for it.\n\n")
		}
		in := f.InputSchema
		if len(in) == 0 {
			in = json.RawMessage(`{"type":"object"}`)
		}
		fmt.Fprintf(&b, "Argument (one object): %s\n", compactJSON(in))
		if len(f.OutputSchema) > 0 {
			fmt.Fprintf(&b, "Returns: %s\n", compactJSON(f.OutputSchema))
		}
		collectDefs(in, shared)
		collectDefs(f.OutputSchema, shared)
	}
	if len(shared) > 0 {
		fmt.Fprintf(&b, "\n%s Shared Types\n\n", h)
		for _, name := range sortedKeys(shared) {
			fmt.Fprintf(&b, "- %s: %s\n", name, compactJSON(shared[name]))
		}
	}
	return b.String()
}

// collectDefs gathers the named types ($defs) that the schemas declare.
func collectDefs(schema json.RawMessage, into map[string]json.RawMessage) {
	var s struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return
	}
	for k, v := range s.Defs {
		into[k] = v
	}
}

func compactJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	if s == "" {
		return "(no description)"
	}
	return s
}
