package evaluator_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/exprd/exprd/evaluator"
)

// printHost mirrors each write as a client would, accepts every confirm and
// runs no client functions.
type printHost struct{}

func (printHost) Write(_ context.Context, w evaluator.Write) error {
	fmt.Printf("write step %d: %s = %s\n", w.Step, w.Path, w.ValueJSON)
	return nil
}

func (printHost) Confirm(context.Context, int, string) (bool, error) { return true, nil }

func (printHost) CallClient(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("no client functions here")
}

// A call selects the three cheapest products, then reads how many it chose.
func ExampleEvaluator_Run() {
	e, err := evaluator.New()
	if err != nil {
		panic(err)
	}
	tool, err := evaluator.NewTool(evaluator.Settings{Read: true}, evaluator.DefaultBudgets())
	if err != nil {
		panic(err)
	}
	st := evaluator.NewState()
	if err := st.Replace([]byte(`{"products": [
		{"id": "p1", "price": 40.21}, {"id": "p2", "price": 10.55},
		{"id": "p3", "price": 8.84}, {"id": "p4", "price": 17.71}]}`)); err != nil {
		panic(err)
	}
	input := `{"steps": [{"set": "scopes.root.selected",
	                      "expr": "fromPairs(map(sortBy(scopes.root.products, .price)[:3], [.id, true]))"}],
	           "read": "len(scopes.root.selected)"}`
	answer := e.Run(context.Background(), tool, st, []byte(input), printHost{})
	fmt.Printf("answer: %s\n", answer.JSON())

	// A mistake is an answer too, for the model to fix.
	answer = e.Run(context.Background(), tool, st, []byte(`{"steps": [{"set": "scopes.evt.x", "expr": "1"}]}`), printHost{})
	fmt.Printf("answer: %s\n", answer.JSON())
	// Output:
	// write step 0: scopes.root.selected = {"p2":true,"p3":true,"p4":true}
	// answer: {"value":3}
	// answer: {"error":{"message":"step 0: set address \"scopes.evt.x\" is outside scopes.root: addresses start with \"scopes.root\"","reason":"guardrail-violation"}}
}
