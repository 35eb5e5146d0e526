package evaluator

import (
	"fmt"
	"sort"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"

	"github.com/exprd/exprd/internal/exprbound"
)

// reservedPrefix starts the names the sandbox adds to programs (the
// iteration counter, the bounded operations); an expression may neither
// read nor declare them, nor a function be named so.
const reservedPrefix = exprbound.ReservedPrefix

// policy is the whitelist of one tool's expressions: names are scopes (read
// only as scopes.root), the expression's own let names and the tool's
// functions, which are all it may call, by name.
func (t *Tool) policy(src string) *exprbound.Policy {
	at := func(e *Error, n ast.Node) error {
		fe := (&file.Error{Location: n.Location(), Message: e.Message}).Bind(file.NewSource(src))
		return fromFileError(e.Reason, fe)
	}
	// A misuse of scopes is reported after every unknown name: first what
	// does not exist, then how to read what does. Of the misuses, a
	// property other than root comes before scopes read whole.
	var badProperty, whole error
	return &exprbound.Policy{
		Size: func(nodes int) error {
			if nodes > t.budgets.MaxNodes {
				return errorf(GuardrailViolation, "the expression has %d nodes, over the limit of %d: split it into steps", nodes, t.budgets.MaxNodes)
			}
			return nil
		},
		Let: func(l *ast.VariableDeclaratorNode) error {
			if strings.HasPrefix(l.Name, reservedPrefix) {
				return at(errorf(GuardrailViolation, "let name %q is reserved: names starting with %q are the evaluator's", l.Name, reservedPrefix), l)
			}
			return nil
		},
		Call: func(call *ast.CallNode) error {
			id, ok := call.Callee.(*ast.IdentifierNode)
			switch {
			case !ok:
				return at(errorf(UnknownReference, "only the session's functions can be called, by name; this calls a computed value"), call)
			case id.Value == "$env":
				return at(errorf(UnknownReference, "$env is not available"), id)
			case t.funcs[id.Value] == nil:
				return at(t.unknownFunction(id.Value), id)
			}
			return nil
		},
		// Every call the check lets through is to a host function, run by
		// the client or the server, with effects the step must not skip.
		Effect: func(*ast.CallNode) bool { return true },
		Name: func(id *ast.IdentifierNode, declared bool, m *ast.MemberNode) error {
			switch {
			case id.Value == "$env":
				return at(errorf(UnknownReference, "$env is not available: read the state through scopes.root"), id)
			case declared, t.funcs[id.Value] != nil:
				return nil
			case id.Value != "scopes":
				return at(errorf(UnknownReference, "unknown name %q: the state is scopes.root, and the functions are %s", id.Value, t.functionList()), id)
			}
			// scopes is read only as scopes.root: the scopes object itself
			// never becomes a value, which lets a call reuse it from step
			// to step.
			if m == nil {
				if whole == nil {
					whole = at(errorf(UnknownReference, "scopes is read only as scopes.root"), id)
				}
				return nil
			}
			switch s, ok := m.Property.(*ast.StringNode); {
			case badProperty != nil:
			case !ok:
				badProperty = at(errorf(UnknownReference, "scopes is read only as scopes.root"), m)
			case s.Value != "root":
				badProperty = at(errorf(UnknownReference, "scopes.%s does not exist: only scopes.root is reachable", s.Value), m)
			}
			return nil
		},
		Done: func() error {
			if badProperty != nil {
				return badProperty
			}
			return whole
		},
	}
}

func (t *Tool) unknownFunction(name string) *Error {
	if why, ok := t.refused[name]; ok {
		return errorf(UnknownReference, "function %q cannot be called here: %s", name, why)
	}
	return errorf(UnknownReference, "unknown function %q: the functions are %s", name, t.functionList())
}

func (t *Tool) functionList() string {
	if len(t.names) == 0 {
		return "none"
	}
	return strings.Join(t.names, ", ")
}

// fromFileError turns expr's positioned error into one of ours.
func fromFileError(reason Reason, err *file.Error) *Error {
	msg := err.Message
	if err.Line > 0 {
		msg = fmt.Sprintf("%s (line %d, column %d)%s", err.Message, err.Line, err.Column+1, err.Snippet)
	}
	return &Error{Reason: reason, Message: msg, Step: -1, Line: err.Line, Column: err.Column + 1}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
