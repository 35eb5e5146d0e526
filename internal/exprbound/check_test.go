package exprbound_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/exprd/exprd/internal/exprbound"
)

// recorder is a policy that allows everything and records what Check asks,
// in order.
func recorder(asked *[]string) *exprbound.Policy {
	return &exprbound.Policy{
		Size: func(n int) error { *asked = append(*asked, fmt.Sprint("size ", n)); return nil },
		Let:  func(l *ast.VariableDeclaratorNode) error { *asked = append(*asked, "let "+l.Name); return nil },
		Call: func(c *ast.CallNode) error { *asked = append(*asked, "call "+c.Callee.String()); return nil },
		Name: func(id *ast.IdentifierNode, declared bool, m *ast.MemberNode) error {
			s := "name " + id.Value
			if declared {
				s += " declared"
			}
			if m != nil {
				s += " of " + m.String()
			}
			*asked = append(*asked, s)
			return nil
		},
	}
}

// Check asks about the size, then every let, every call and every name
// read, each in source order; callees are asked about as calls only.
func TestCheckAsksInOrder(t *testing.T) {
	t.Parallel()
	tree, err := parser.Parse(`let a = f(x); ns.g(a, y.z) + a`)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	if err := exprbound.Check(tree, recorder(&asked)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"size 14",
		"let a",
		"call f", "call ns.g",
		"name x", "name a declared", "name y of y.z", "name a declared",
	}
	if !slices.Equal(asked, want) {
		t.Errorf("got %q, want %q", asked, want)
	}
}

// The first refusal is returned as it is, and nothing after it is asked.
func TestCheckStopsAtTheFirstRefusal(t *testing.T) {
	t.Parallel()
	tree, err := parser.Parse(`f(x)`)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	p := recorder(&asked)
	refused := fmt.Errorf("refused")
	p.Call = func(*ast.CallNode) error { return refused }
	if err := exprbound.Check(tree, p); err != refused {
		t.Errorf("got %v, want the policy's error", err)
	}
	if want := []string{"size 3"}; !slices.Equal(asked, want) {
		t.Errorf("got %q asked, want %q", asked, want)
	}
}

// With LetPrefix, let names and their reads are renamed once the check has
// passed; other names are not.
func TestCheckLetPrefix(t *testing.T) {
	t.Parallel()
	tree, err := parser.Parse(`let sum = x; sum`)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	p := recorder(&asked)
	p.LetPrefix = "__v_"
	if err := exprbound.Check(tree, p); err != nil {
		t.Fatal(err)
	}
	if got, want := tree.Node.String(), "let __v_sum = x; __v_sum"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
