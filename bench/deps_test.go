package bench

import (
	_ "cel.dev/cel-go/cel"
	_ "github.com/dop251/goja"
	_ "github.com/exprd/exprd/evaluator"
	_ "gonum.org/v1/plot"
)
