package codemode

import (
	"container/list"
	"errors"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/exprd/exprd/internal/exprbound"
)

// tickName is the counter the patcher calls at the start of every predicate
// body.
const tickName = exprbound.TickName

// tickCheckEvery is how many ticks pass between checks of the context.
const tickCheckEvery = 1024

// toolFunc is the type of the namespace's functions in the environment.
type toolFunc = func(args ...any) (any, error)

// namespace is `codemode` in the environment: the functions bound to one
// run.
type namespace struct {
	CallTool       toolFunc
	CallToolStream toolFunc
	Get            toolFunc
}

// program is a compiled source and what its check found. Programs are
// immutable and shared between runs.
type program struct {
	prog     *vm.Program
	analysis *Analysis
}

// compile compiles src with the sandbox (exprbound.Compile), the
// whitelist walking the parsed tree between parse and patch, as the
// evaluator does.
func compile(src string, b *Budgets) (*program, *Error) {
	if err := checkSource(src, b); err != nil {
		return nil, err
	}
	env := map[string]any{nsName: namespace{}, tickName: func() bool { return true }}
	limit := b.MaxStringLength
	var a *Analysis
	p, err := exprbound.Compile(src, env, exprbound.Limits{
		MaxString: limit,
		TooLong:   func(msg string) error { return budgetError(BudgetString, "%s", msg) },
		Normalize: func(v any) (any, error) { return jsonValue(v, limit*utf8.UTFMax) },
	}, func(tree *parser.Tree) error {
		var cerr *Error
		if a, cerr = checkTree(tree, src, b); cerr != nil {
			return cerr
		}
		return nil
	})
	if err != nil {
		var e *Error
		var se *exprbound.StageError
		switch {
		case errors.As(err, &e):
			return nil, e
		case errors.As(err, &se) && se.Stage == exprbound.StageSyntax:
			return nil, fromExpr(ExpressionSyntax, se.Err)
		case errors.As(err, &se) && se.Stage == exprbound.StageRuntime:
			return nil, fromExpr(ExpressionRuntime, se.Err)
		default:
			return nil, fromExpr(ExpressionType, err)
		}
	}
	return &program{prog: p, analysis: a}, nil
}

// cacheKey is the source and the budgets that change how it compiles.
type cacheKey struct {
	src                       string
	maxNodes, maxStringLength int
}

// cache is a bounded LRU of compiled programs.
type cache struct {
	mu      sync.Mutex
	size    int
	ll      *list.List
	entries map[cacheKey]*list.Element
}

type cacheEntry struct {
	key cacheKey
	p   *program
}

func newCache(size int) *cache {
	return &cache{size: size, ll: list.New(), entries: map[cacheKey]*list.Element{}}
}

func (c *cache) get(k cacheKey) (*program, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cacheEntry).p, true
}

func (c *cache) put(k cacheKey, p *program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok {
		return
	}
	c.entries[k] = c.ll.PushFront(&cacheEntry{key: k, p: p})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}
