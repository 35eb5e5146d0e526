package evaltest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/exprd/exprd/evaluator"
)

// Case is one call and what it must produce. See the package documentation
// for its JSON form.
type Case struct {
	Name string `json:"name"`
	// State is a name of demo/<name>.json (a JSON string) or an inline
	// JSON object.
	State  json.RawMessage `json:"state,omitempty"`
	Config Config          `json:"settings"`
	Limits Limits          `json:"budgets"`
	// Confirm replies to the call's confirm requests in order; past its
	// end, requests are accepted.
	Confirm []bool `json:"confirm,omitempty"`
	// Input is the tool input; InputRaw, when set, is sent instead.
	Input    json.RawMessage `json:"input,omitempty"`
	InputRaw *string         `json:"input_raw,omitempty"`
	Want     Want            `json:"want"`
	// Writes, ClientCalls and StateAfter are checked when not nil.
	Writes      []WantWrite     `json:"writes,omitempty"`
	ClientCalls []ClientCall    `json:"client_calls,omitempty"`
	StateAfter  json.RawMessage `json:"state_after,omitempty"`

	// stateJSON is State resolved by LoadCases.
	stateJSON []byte
}

// Config is a case's settings, naming functions of the catalogue.
type Config struct {
	Read      bool     `json:"read,omitempty"`
	Functions []string `json:"functions,omitempty"`
	// ToolFunctions, when not nil (even empty), replaces Functions for tool
	// calls.
	ToolFunctions []string `json:"tool_functions,omitempty"`
	Note          string   `json:"note,omitempty"`
}

// Limits is a case's budgets, as in the proto's Budgets: 0 means the
// server's maximum.
type Limits struct {
	TimeoutMS         uint32 `json:"timeout_ms,omitempty"`
	MaxIterations     uint64 `json:"max_iterations,omitempty"`
	MemoryBudget      uint64 `json:"memory_budget,omitempty"`
	MaxSourceLength   uint32 `json:"max_source_length,omitempty"`
	MaxNodes          uint32 `json:"max_nodes,omitempty"`
	MaxStringLength   uint32 `json:"max_string_length,omitempty"`
	MaxArrayLength    uint32 `json:"max_array_length,omitempty"`
	MaxReadChars      uint32 `json:"max_read_chars,omitempty"`
	FunctionTimeoutMS uint32 `json:"function_timeout_ms,omitempty"`
	MaxSteps          uint32 `json:"max_steps,omitempty"`
	MaxAllocBytes     uint64 `json:"max_alloc_bytes,omitempty"`
	MaxFunctionCalls  uint32 `json:"max_function_calls,omitempty"`
}

// Want is the answer a case expects: exactly Answer, or an error with
// Reason whose message contains MessageContains.
type Want struct {
	Answer          json.RawMessage  `json:"answer,omitempty"`
	Reason          evaluator.Reason `json:"reason,omitempty"`
	MessageContains string           `json:"message_contains,omitempty"`
}

// WantWrite is one expected write.
type WantWrite struct {
	Step  int             `json:"step"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// ClientCall is one call of a client-run function.
type ClientCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// LoadCases reads a JSON array of cases strictly: an unknown field, a name
// outside the catalogue, a missing state file or a budget above the
// server's maximum is an error.
func LoadCases(path string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cases []Case
	if err := dec.Decode(&cases); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the array of cases", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range cases {
		c := &cases[i]
		if seen[c.Name] {
			return nil, fmt.Errorf("%s: case %d: name %q is used twice", path, i, c.Name)
		}
		seen[c.Name] = true
		if err := c.resolve(filepath.Dir(abs)); err != nil {
			return nil, fmt.Errorf("%s: case %d (%q): %w", path, i, c.Name, err)
		}
	}
	return cases, nil
}

var stateNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// resolve checks c and reads its state, looking for demo/ from dir up
// (or, failing that, from the working directory up).
func (c *Case) resolve(dir string) error {
	if c.Name == "" {
		return errors.New("no name")
	}
	catalogue := Functions()
	for _, name := range slices.Concat(c.Config.Functions, c.Config.ToolFunctions) {
		if _, ok := catalogue[name]; !ok {
			return fmt.Errorf("function %q is not in the catalogue", name)
		}
	}
	if _, err := evaluator.DefaultBudgets().Lower(c.Limits.budgets()); err != nil {
		return err
	}
	switch {
	case c.Input == nil && c.InputRaw == nil:
		return errors.New("no input or input_raw")
	case c.Input != nil && c.InputRaw != nil:
		return errors.New("both input and input_raw")
	}
	switch {
	case (c.Want.Answer == nil) == (c.Want.Reason == ""):
		return errors.New(`want needs exactly one of "answer" and "reason"`)
	case c.Want.Reason != "" && !slices.Contains(evaluator.Reasons, c.Want.Reason):
		return fmt.Errorf("reason %q is not one of evaluator.Reasons", c.Want.Reason)
	case c.Want.MessageContains != "" && c.Want.Reason == "":
		return errors.New(`message_contains needs "reason"`)
	}
	var name string
	switch {
	case len(c.State) == 0:
		c.stateJSON = []byte(`{}`)
	case json.Unmarshal(c.State, &name) == nil:
		if !stateNameRE.MatchString(name) {
			return fmt.Errorf("state name %q is not a plain file name", name)
		}
		root, err := repoRoot(dir)
		if err != nil {
			// A cases file outside the repository: look from here.
			wd, werr := os.Getwd()
			if werr != nil {
				return err
			}
			if root, err = repoRoot(wd); err != nil {
				return err
			}
		}
		if c.stateJSON, err = os.ReadFile(filepath.Join(root, "demo", name+".json")); err != nil {
			return err
		}
	default:
		var obj map[string]any
		if err := json.Unmarshal(c.State, &obj); err != nil || obj == nil {
			return errors.New("state is neither a name nor a JSON object")
		}
		c.stateJSON = c.State
	}
	return nil
}

// repoRoot walks up from dir to the directory holding go.mod.
func repoRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		d = up
	}
}

// Settings returns the case's settings with the catalogue's functions.
func (c Case) Settings() evaluator.Settings {
	catalogue := Functions()
	s := evaluator.Settings{Read: c.Config.Read, Note: c.Config.Note}
	for _, name := range c.Config.Functions {
		s.Functions = append(s.Functions, catalogue[name])
	}
	if c.Config.ToolFunctions != nil {
		s.HasToolFunctions = true
		s.ToolFunctions = []evaluator.Function{}
		for _, name := range c.Config.ToolFunctions {
			f := catalogue[name]
			if slices.Contains(c.Config.Functions, name) {
				f = evaluator.Function{Name: name}
			}
			s.ToolFunctions = append(s.ToolFunctions, f)
		}
	}
	return s
}

// Budgets returns the server's maxima lowered by the case's budgets. A
// budget above a maximum (which LoadCases refuses) is left at the maximum.
func (c Case) Budgets() evaluator.Budgets {
	d := evaluator.DefaultBudgets()
	b, err := d.Lower(c.Limits.budgets())
	if err != nil {
		return d
	}
	return b
}

func (l Limits) budgets() evaluator.Budgets {
	return evaluator.Budgets{
		Timeout:          time.Duration(l.TimeoutMS) * time.Millisecond,
		MaxIterations:    l.MaxIterations,
		MemoryBudget:     l.MemoryBudget,
		MaxSourceLength:  int(l.MaxSourceLength),
		MaxNodes:         int(l.MaxNodes),
		MaxStringLength:  int(l.MaxStringLength),
		MaxArrayLength:   int(l.MaxArrayLength),
		MaxReadChars:     int(l.MaxReadChars),
		FunctionTimeout:  time.Duration(l.FunctionTimeoutMS) * time.Millisecond,
		MaxSteps:         int(l.MaxSteps),
		MaxAllocBytes:    int(l.MaxAllocBytes),
		MaxFunctionCalls: int(l.MaxFunctionCalls),
	}
}

// StateJSON returns the state the call starts from.
func (c Case) StateJSON() []byte {
	if c.stateJSON != nil {
		return c.stateJSON
	}
	if len(c.State) > 0 && c.State[0] == '{' {
		return c.State
	}
	return []byte(`{}`)
}

// InputJSON returns the bytes sent as the tool input.
func (c Case) InputJSON() []byte {
	if c.InputRaw != nil {
		return []byte(*c.InputRaw)
	}
	return c.Input
}

// Unary reports whether the case can also run through a unary Call, which
// declines every confirm and refuses client-run functions: the input has no
// confirm step, and no client-run function of the settings is expected in
// client_calls or named in the input's expressions.
func (c Case) Unary() bool {
	var in struct {
		Steps []map[string]any `json:"steps"`
		Read  any              `json:"read"`
	}
	text := string(c.InputJSON())
	if json.Unmarshal(c.InputJSON(), &in) == nil {
		var exprs bytes.Buffer
		for _, s := range in.Steps {
			if _, ok := s["confirm"]; ok {
				return false
			}
			fmt.Fprintf(&exprs, "%v\n", s["expr"])
		}
		fmt.Fprintf(&exprs, "%v\n", in.Read)
		text = exprs.String()
	}
	s := c.Settings()
	for _, f := range slices.Concat(s.Functions, s.ToolFunctions) {
		// A reference has no runner: its session function is in s.Functions.
		if f.Runner != evaluator.RunClient {
			continue
		}
		if regexp.MustCompile(`\b` + f.Name + `\b`).MatchString(text) {
			return false
		}
		for _, call := range c.ClientCalls {
			if call.Name == f.Name {
				return false
			}
		}
	}
	return true
}
