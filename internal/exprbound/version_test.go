package exprbound_test

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// checkedExpr is the version of github.com/expr-lang/expr the sandbox's
// soundness was checked against.
const checkedExpr = "v1.17.8"

// exprReliedOn is what the sandbox relies on expr doing, as its comments
// say; each must be checked again, in expr's source, before moving
// checkedExpr.
var exprReliedOn = []string{
	"builtins cannot be disabled, and are not calls in the parsed tree: Check's walk of the tree as parsed is the whitelist (check.go)",
	"the VM cannot be interrupted: TickPatcher's __tick at the start of every predicate body counts each iteration of filter, map, reduce, sortBy, ... (tick.go)",
	"the memory budget counts the items of arrays and maps, not bytes, and not strings: the meter's __alloc wraps every operation that builds a value (meter.go, bounded_internal_test.go)",
	"+ - * of integers wrap, the optimiser folds constants with wrapping and sums a range of constants by a formula, sum adds with the same opcode, int(1e19) converts out of range: foldPass runs before the optimiser and opsPass swaps in the checked operations (arith.go)",
	".. counts a range's items as n - m + 1 and makes them as m + i, wrapping, and charges the memory budget before it builds the range; the optimiser folds no range: checkedRange checks the end first (ops.go)",
	"the VM calls a constant func(any, any) any or func(any) any directly, and turns its panic into the program's error at the operation's position (arith.go: fail)",
	"repeat charges only after building its string; +, join and replace build strings uncharged: the bounded builtins of Functions replace them (exprbound.go)",
	"sortBy and sort use sort.Sort, which is not stable: stableSort rewrites them into map and __sortBy (sort.go)",
	"uniq compares every item with every kept one using ==, which compares arrays item by item with == and objects with reflect.DeepEqual, and null equal to a nil array or object: the linear uniq keys items to match (costly.go)",
	"a member read goes through runtime.Fetch: a missing key is nil, a negative index counts from the end, an index out of range and a missing value panic as fetch does (ops.go)",
	"ast.Walk does not descend into a builtin's Map, the body the optimiser fused into a filter (ops.go: opsPass.Visit)",
	"the optimiser runs a body fewer times than written (fused map and filter, count(...) > 0 and [0] stopping at the first): Policy.Effect turns it off (check.go)",
	"the checker refuses to redeclare a builtin's name with let: Policy.LetPrefix (check.go)",
	"vm.Run resets the stack, scopes and memory count of a reused VM: VMs pools VMs (vms.go)",
	"the texts of the Go panics the VM turns into errors (reflect.ValueError, TypeAssertionError, \"reflect: ... index out of range\"): PanicMessage words them (panics.go)",
}

// The fuzz targets that hold the sandbox to expr, to run for a few
// minutes each after an upgrade (go test -run '^$' -fuzz '^FuzzX$'
// -fuzztime 3m ./internal/exprbound).
const exprFuzzTargets = "FuzzCompiledIsBounded, FuzzMemberAccess, FuzzConstFold, FuzzStringBounds, FuzzMatches, FuzzPooledRun, FuzzArith, FuzzSortByKeys, FuzzUniqIsExprs, FuzzUniq, FuzzNormalize"

// TestExprVersion fails when the module builds with another expr than the
// one the sandbox was checked against, saying what to check again. It reads
// the test binary's build information, or, when that lists no
// dependencies (go test builds test binaries without), the module's go.mod.
func TestExprVersion(t *testing.T) {
	t.Parallel()
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == exprPath {
				version = d.Version
				if d.Replace != nil {
					version = "replaced by " + d.Replace.Path + " " + d.Replace.Version
				}
			}
		}
	}
	if version == "" {
		version = goModVersion(t)
	}
	if version == checkedExpr {
		return
	}
	msg := exprPath + " is " + version + ", not " + checkedExpr + ", the version internal/exprbound's soundness was checked against. Before moving checkedExpr, check in expr's source that each of these still holds:"
	for _, r := range exprReliedOn {
		msg += "\n  - " + r
	}
	msg += "\nand run its fuzz targets a few minutes each: " + exprFuzzTargets
	t.Fatal(msg)
}

const exprPath = "github.com/expr-lang/expr"

// goModVersion is the version of expr the module's go.mod requires, or
// says what replaces it.
func goModVersion(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			return requiredVersion(string(data))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// requiredVersion reads expr's version from a go.mod's text: its require
// line, in a block or not; a replace of it says what replaces it.
func requiredVersion(gomod string) string {
	version, block := "not required", ""
	for line := range strings.Lines(gomod) {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		kind := block
		switch {
		case len(f) == 0:
			continue
		case len(f) == 1 && f[0] == ")":
			block = ""
			continue
		case len(f) == 2 && f[1] == "(":
			block = f[0]
			continue
		case f[0] == "require" || f[0] == "replace":
			kind, f = f[0], f[1:]
		}
		if len(f) < 2 || f[0] != exprPath {
			continue
		}
		switch kind {
		case "replace":
			return "replaced (" + strings.Join(f, " ") + ")"
		case "require":
			version = f[1]
		}
	}
	return version
}

// requiredVersion finds the version wherever go.mod may say it.
func TestRequiredVersion(t *testing.T) {
	t.Parallel()
	tests := []struct{ gomod, want string }{
		{"module m\n\nrequire (\n\tgithub.com/expr-lang/expr v1.17.8\n\tgithub.com/x/y v1.0.0\n)\n", "v1.17.8"},
		{"module m\nrequire github.com/expr-lang/expr v1.2.3 // indirect\n", "v1.2.3"},
		{"module m\nrequire github.com/expr-lang/expr v1.2.3\nreplace github.com/expr-lang/expr => ../expr\n", "replaced (github.com/expr-lang/expr => ../expr)"},
		{"module m\nrequire github.com/expr-lang/expr v1.2.3\nreplace (\n\tgithub.com/expr-lang/expr v1.2.3 => github.com/fork/expr v1.2.4\n)\n", "replaced (github.com/expr-lang/expr v1.2.3 => github.com/fork/expr v1.2.4)"},
		{"module m\nrequire github.com/expr-lang/expr/sub v1.2.3\n", "not required"},
	}
	for _, tt := range tests {
		if got := requiredVersion(tt.gomod); got != tt.want {
			t.Errorf("requiredVersion(%q): got %q, want %q", tt.gomod, got, tt.want)
		}
	}
}
