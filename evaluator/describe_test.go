package evaluator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	t.Run("name", func(t *testing.T) {
		t.Parallel()
		if got := newTool(t, evaluator.Settings{}).Describe().Name; got != "expr" {
			t.Errorf("Name: got %q, want %q", got, "expr")
		}
	})
	t.Run("read on and off change the input schema and the description", func(t *testing.T) {
		t.Parallel()
		for _, read := range []bool{false, true} {
			d := newTool(t, evaluator.Settings{Read: read}).Describe()
			var schema struct {
				Schema     string                     `json:"$schema"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			}
			if err := json.Unmarshal(d.InputSchema, &schema); err != nil {
				t.Fatalf("InputSchema (read %v): %v", read, err)
			}
			if schema.Schema != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("InputSchema (read %v): got $schema %q, want draft 2020-12", read, schema.Schema)
			}
			if _, has := schema.Properties["read"]; has != read {
				t.Errorf("InputSchema (read %v): got read property %v, want %v", read, has, read)
			}
			if _, has := schema.Properties["steps"]; !has {
				t.Errorf("InputSchema (read %v): got no steps property, want one", read)
			}
			if has := strings.Contains(d.Description, `"read"`); has != read {
				t.Errorf("Description (read %v): got mention of \"read\" %v, want %v", read, has, read)
			}
			if has := strings.Contains(string(d.OutputSchema), `"value"`); has != read {
				t.Errorf("OutputSchema (read %v): got a value answer %v, want %v", read, has, read)
			}
		}
	})
	t.Run("max_steps bounds the steps in the input schema", func(t *testing.T) {
		t.Parallel()
		b, err := evaluator.DefaultBudgets().Lower(evaluator.Budgets{MaxSteps: 7})
		if err != nil {
			t.Fatal(err)
		}
		tool, err := evaluator.NewTool(evaluator.Settings{}, b)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(tool.Describe().InputSchema), `"maxItems":7`) {
			t.Errorf("InputSchema: got %s, want maxItems 7", tool.Describe().InputSchema)
		}
	})
	t.Run("the read limit is the tool's max_read_chars", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			maxReadChars int
			want, not    string
		}{
			{0, "at most 8,000 characters", ""}, // 0 keeps the server's maximum
			{7999, "at most 7,999 characters", "8,000"},
			{500, "at most 500 characters", "8,000"},
			{1, "at most 1 character", "1 characters"},
			{1_234_567, "at most 1,234,567 characters", "8,000"}, // a server maximum raised by --max-read-chars
		} {
			b := evaluator.DefaultBudgets()
			if tt.maxReadChars != 0 {
				b.MaxReadChars = tt.maxReadChars
			}
			tool, err := evaluator.NewTool(evaluator.Settings{Read: true}, b)
			if err != nil {
				t.Fatal(err)
			}
			d := tool.Describe()
			if !strings.Contains(d.Description, tt.want) {
				t.Errorf("Description (max_read_chars %d): got %q, want it to contain %q", tt.maxReadChars, d.Description, tt.want)
			}
			var schema struct {
				Properties struct {
					Read struct {
						Description string `json:"description"`
					} `json:"read"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(d.InputSchema, &schema); err != nil {
				t.Fatal(err)
			}
			if got := schema.Properties.Read.Description; !strings.Contains(got, tt.want) {
				t.Errorf("InputSchema read (max_read_chars %d): got %q, want it to contain %q", tt.maxReadChars, got, tt.want)
			}
			if all := d.Description + string(d.InputSchema); tt.not != "" && strings.Contains(all, tt.not) {
				t.Errorf("Describe (max_read_chars %d): got %q in the description or schema, want none", tt.maxReadChars, tt.not)
			}
		}
	})
	t.Run("the output schema lists every reason", func(t *testing.T) {
		t.Parallel()
		out := string(newTool(t, evaluator.Settings{}).Describe().OutputSchema)
		for _, r := range evaluator.Reasons {
			if !strings.Contains(out, `"`+string(r)+`"`) {
				t.Errorf("OutputSchema: got %s, want reason %q in it", out, r)
			}
		}
	})
	t.Run("tool_functions are rendered in the description, replacing the prompt's", func(t *testing.T) {
		t.Parallel()
		d := newTool(t, evaluator.Settings{
			Functions:        catalogue("echo", "downloadCsv"),
			HasToolFunctions: true,
			ToolFunctions:    []evaluator.Function{{Name: "downloadCsv"}, catalogue("total")[0]},
		}).Describe()
		for _, want := range []string{"## Functions", "replace", "## Available Functions", "downloadCsv(args)", "total(args)", "\n### total\n", "Sums the prices of rows.", "Runs in the user's app"} {
			if !strings.Contains(d.Description, want) {
				t.Errorf("Description: got %q, want it to contain %q", d.Description, want)
			}
		}
		if strings.Contains(d.Description, "echo") {
			t.Errorf("Description: got %q, want no echo (not a tool function)", d.Description)
		}
		// The system prompt's partial describes the session's functions.
		if !strings.Contains(d.FunctionsPrompt, "echo(args)") || strings.Contains(d.FunctionsPrompt, "total(args)") {
			t.Errorf("FunctionsPrompt: got %q, want the session's functions (echo, downloadCsv), not total", d.FunctionsPrompt)
		}
	})
	t.Run("empty tool_functions say the tool calls none", func(t *testing.T) {
		t.Parallel()
		d := newTool(t, evaluator.Settings{Functions: catalogue("echo"), HasToolFunctions: true}).Describe()
		if !strings.Contains(d.Description, "no functions") {
			t.Errorf("Description: got %q, want it to say the tool calls no functions", d.Description)
		}
	})
	t.Run("without tool_functions the description has no functions", func(t *testing.T) {
		t.Parallel()
		d := newTool(t, evaluator.Settings{Functions: catalogue("echo")}).Describe()
		if strings.Contains(d.Description, "## Functions") {
			t.Errorf("Description: got %q, want no functions section", d.Description)
		}
	})
	t.Run("note", func(t *testing.T) {
		t.Parallel()
		d := newTool(t, evaluator.Settings{Note: "  Prices are in euros.\n"}).Describe()
		if !strings.HasSuffix(d.Description, "\n## Note\n\nPrices are in euros.\n") {
			t.Errorf("Description: got %q, want it to end with the note under ## Note", d.Description)
		}
		if d := newTool(t, evaluator.Settings{}).Describe(); strings.Contains(d.Description, "## Note") {
			t.Errorf("Description without a note: got %q, want no ## Note", d.Description)
		}
	})
	t.Run("the functions prompt has its three headings", func(t *testing.T) {
		t.Parallel()
		d := newTool(t, evaluator.Settings{Functions: catalogue("echo", "total", "downloadCsv")}).Describe()
		p := d.FunctionsPrompt
		last := -1
		for _, h := range []string{"# Available Functions\n", "# Function Details\n", "# Shared Types\n"} {
			i := strings.Index(p, h)
			if i < 0 || !strings.HasPrefix(p[i:], h) || (i > 0 && p[i-1] != '\n') {
				t.Errorf("FunctionsPrompt: got %q, want heading %q at the start of a line", p, h)
				continue
			}
			if i < last {
				t.Errorf("FunctionsPrompt: got %q out of order", h)
			}
			last = i
		}
		for _, want := range []string{"- echo(args): Returns its argument.", "\n## total\n", `"$ref":"#/$defs/Row"`, "- Row: "} {
			if !strings.Contains(p, want) {
				t.Errorf("FunctionsPrompt: got %q, want it to contain %q", p, want)
			}
		}
	})
	t.Run("the core prompt teaches steps and the language", func(t *testing.T) {
		t.Parallel()
		p := newTool(t, evaluator.Settings{}).Describe().CorePrompt
		for _, want := range []string{"## Steps", "## The Expr language", "scopes.root"} {
			if !strings.Contains(p, want) {
				t.Errorf("CorePrompt: want it to contain %q", want)
			}
		}
	})
}

// TestDescribeExamplesRun runs the core prompt's example calls: an example
// the tool refuses would teach the model a mistake.
func TestDescribeExamplesRun(t *testing.T) {
	t.Parallel()
	e := newEvaluator(t)
	tool := newTool(t, evaluator.Settings{})
	prompt := tool.Describe().CorePrompt
	n := 0
	for line := range strings.Lines(prompt) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, `{"steps"`) {
			continue
		}
		n++
		st := newState(t, `{"products":{"items":[{"id":"a","price":1,"discontinued":true},{"id":"b","price":2,"discontinued":false}]},"items":[{},{},{"name":"x"}],"filter":"x"}`)
		a := e.Run(t.Context(), tool, st, []byte(line), evaltest.NewHost(nil))
		if a.Err != nil {
			t.Errorf("example %s: got %s, want it to run", line, a.JSON())
		}
	}
	if n < 3 {
		t.Errorf("CorePrompt: got %d example calls, want at least 3", n)
	}
}
