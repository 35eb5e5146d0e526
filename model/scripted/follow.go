package scripted

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A turn with Follow makes its reply from the request, so that the demo
// model does what it is asked with no weights and no network:
//
//   - asked by CodeMode for a plan (the system prompt is CodeMode's), it
//     answers with a plan over the tools the prompt offers: the request is
//     cut into steps ("add 5 and 7, then multiply the sum by 3"), each
//     step calls the offered tool whose name and description share the
//     most words with it, and each call's arguments are the step's numbers
//     and quoted words in the order of the tool's required inputs, a later
//     step taking the earlier one's result first;
//   - in an agent turn, it calls the declared tool that best matches the
//     user's message the same way (the `expr` tool, when declared and no
//     other matches, to select the five cheapest products of the demo
//     state), and once the tool's result is back it answers with it;
//   - when nothing matches, it says so in text.

// exprProgram is what the demo asks the `expr` tool: select the five
// cheapest products of the demo state.
var exprProgram = json.RawMessage(`{"steps":[{"set":"scopes.root.selected","expr":"fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}]}`)

// codeModeMarker is a line of CodeMode's planning prompt.
const codeModeMarker = "codemode.CallTool(name, args)"

// follow is the reply to chat: its text and tool calls.
func follow(chat *ChatRequest) (string, []ToolCall) {
	last := chat.Messages[len(chat.Messages)-1]
	if sys := systemText(chat); strings.Contains(sys, codeModeMarker) {
		return planReply(sys, chat.LastUser()), nil
	}
	if last.Role == "tool" {
		return answerWith(chat), nil
	}
	return callFor(chat)
}

func systemText(chat *ChatRequest) string {
	for _, m := range chat.Messages {
		if m.Role == "system" || m.Role == "developer" {
			return m.Content
		}
	}
	return ""
}

// offered is a tool the request offers: its name, what it says of itself,
// its required inputs in order, and its output's first property.
type offered struct {
	name, desc string
	required   []string
	props      map[string]string // input property → its JSON Schema type
	output     string
}

// words are a text's lower-case words of three letters or more, with a
// final s dropped ("numbers" is "number").
func words(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if len(w) < 3 || stopWord[w] {
			continue
		}
		out = append(out, strings.TrimSuffix(w, "s"))
	}
	return out
}

// arithmetic is how people say the math provider's operations.
var arithmetic = map[string]string{"plu": "add", "sum": "add", "total": "add", "time": "multiply", "product": "multiply",
	"minu": "subtract", "difference": "subtract", "divided": "divide", "quotient": "divide", "root": "sqrt"}

var stopWord = map[string]bool{"the": true, "and": true, "then": true, "with": true, "for": true, "what": true,
	"use": true, "two": true, "from": true, "that": true, "this": true, "please": true, "can": true, "you": true}

// score is how many of step's words the tool's name and description share,
// a word of its name counting twice (once when the step says it another
// way: "plus" for add).
func (t offered) score(step string) int {
	name := words(strings.NewReplacer(".", " ", "_", " ").Replace(t.name))
	desc := words(t.desc)
	n := 0
	for _, w := range words(step) {
		switch {
		case slices.Contains(name, w):
			n += 2
		case slices.Contains(name, arithmetic[w]) || slices.Contains(desc, w):
			n++
		}
	}
	return n
}

// best is the tool of tools that best matches step, nil when none shares a
// word with it.
func best(tools []offered, step string) *offered {
	var top *offered
	topScore := 0
	for i := range tools {
		if s := tools[i].score(step); s > topScore {
			top, topScore = &tools[i], s
		}
	}
	return top
}

var (
	numberRE = regexp.MustCompile(`-?\d+(?:\.\d+)?`)
	quotedRE = regexp.MustCompile(`"([^"]*)"|'([^']*)'`)
	stepRE   = regexp.MustCompile(`(?i),?\s*\b(?:and then|then|after that)\b\s*|;\s*`)
)

// args fills a tool's required inputs in order: first the value carried
// from the step before (when there is one), then the step's numbers for
// number inputs and its quoted words for the others. ok is false when an
// input is left without a value.
func (t offered) args(step string, carried string) (map[string]string, bool) {
	nums := numberRE.FindAllString(step, -1)
	var quoted []string
	for _, m := range quotedRE.FindAllStringSubmatch(step, -1) {
		quoted = append(quoted, strconv.Quote(m[1]+m[2]))
	}
	out := map[string]string{}
	for _, in := range t.required {
		switch {
		case carried != "":
			out[in], carried = carried, ""
		case (t.props[in] == "number" || t.props[in] == "integer") && len(nums) > 0:
			out[in], nums = nums[0], nums[1:]
		case t.props[in] != "number" && t.props[in] != "integer" && len(quoted) > 0:
			out[in], quoted = quoted[0], quoted[1:]
		default:
			return nil, false
		}
	}
	return out, true
}

// object writes args as an Expr map literal, inputs in required order.
func object(t offered, args map[string]string) string {
	var parts []string
	for _, in := range t.required {
		parts = append(parts, strconv.Quote(in)+": "+args[in])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// planReply plans the user's request over the tools of CodeMode's prompt.
func planReply(system, request string) string {
	tools := promptTools(system)
	var calls []string
	var used []string
	carried := ""
	for i, step := range stepRE.Split(request, -1) {
		t := best(tools, step)
		if t == nil {
			continue
		}
		a, ok := t.args(step, carried)
		if !ok {
			continue
		}
		call := fmt.Sprintf("codemode.CallTool(%q, %s)", t.name, object(*t, a))
		calls = append(calls, fmt.Sprintf("let r%d = %s", i+1, call))
		if !slices.Contains(used, t.name) {
			used = append(used, t.name)
		}
		carried = fmt.Sprintf("r%d", i+1)
		if t.output != "" {
			carried = fmt.Sprintf("codemode.Get(r%d, %q)", i+1, t.output)
		}
	}
	if len(calls) == 0 {
		return `{"handled": false, "tools": [], "code": ""}`
	}
	// The last call is the program's value.
	lastCall := calls[len(calls)-1]
	calls[len(calls)-1] = lastCall[strings.Index(lastCall, " = ")+3:]
	plan, _ := json.Marshal(map[string]any{"tools": used, "code": strings.Join(calls, ";\n"), "stream": false})
	return string(plan)
}

// promptTools reads the tools of CodeMode's prompt: "## name", its
// description, "Input schema: {...}", "Output schema: {...}".
func promptTools(system string) []offered {
	var out []offered
	for _, sec := range strings.Split(system, "\n## ")[1:] {
		lines := strings.Split(sec, "\n")
		t := offered{name: strings.TrimSpace(lines[0])}
		for _, l := range lines[1:] {
			switch {
			case strings.HasPrefix(l, "Input schema: "):
				t.required, t.props = schemaInputs(strings.TrimPrefix(l, "Input schema: "))
			case strings.HasPrefix(l, "Output schema: "):
				t.output = firstProperty(strings.TrimPrefix(l, "Output schema: "))
			default:
				t.desc += l + " "
			}
		}
		out = append(out, t)
	}
	return out
}

// schemaInputs are a JSON Schema's required properties, in order (every
// property, in name order, when it requires none), and their types.
func schemaInputs(schema string) ([]string, map[string]string) {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal([]byte(schema), &s) != nil {
		return nil, nil
	}
	types := map[string]string{}
	for name, p := range s.Properties {
		if t, ok := p.Type.(string); ok {
			types[name] = t
		}
	}
	req := s.Required
	if len(req) == 0 {
		for name := range s.Properties {
			req = append(req, name)
		}
		slices.Sort(req)
	}
	return req, types
}

// firstProperty is the first property (by name) of an object schema.
func firstProperty(schema string) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal([]byte(schema), &s) != nil || len(s.Properties) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names[0]
}

// callFor calls the declared tool that best matches the user's message.
func callFor(chat *ChatRequest) (string, []ToolCall) {
	var tools []offered
	hasExpr := false
	for _, ct := range chat.Tools {
		if ct.Function.Name == "expr" {
			hasExpr = true
			continue
		}
		req, props := schemaInputs(string(ct.Function.Parameters))
		tools = append(tools, offered{name: ct.Function.Name, desc: ct.Function.Description, required: req, props: props})
	}
	msg := chat.LastUser()
	if t := best(tools, msg); t != nil {
		if a, ok := t.args(msg, ""); ok {
			args := map[string]json.RawMessage{}
			for k, v := range a {
				args[k] = json.RawMessage(v)
			}
			raw, _ := json.Marshal(args)
			return "I'll call " + t.name + ".", []ToolCall{{Name: t.name, Arguments: raw}}
		}
	}
	if hasExpr {
		return "I'll select the five cheapest products.", []ToolCall{{Name: "expr", Arguments: exprProgram}}
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.name)
	}
	if len(names) == 0 {
		return "I have no tool to do that with.", nil
	}
	return "None of my tools (" + strings.Join(names, ", ") + ") matches that request.", nil
}

// answerWith answers with the result of the tool call just made.
func answerWith(chat *ChatRequest) string {
	last := chat.Messages[len(chat.Messages)-1]
	for i := len(chat.Messages) - 1; i >= 0; i-- {
		m := chat.Messages[i]
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		if m.ToolCalls[0].Function.Name == "expr" {
			return "Done: the five cheapest products are now selected in the list."
		}
		return "The result of " + m.ToolCalls[0].Function.Name + " is " + strings.TrimSpace(last.Content) + "."
	}
	return "The result is " + strings.TrimSpace(last.Content) + "."
}
