package exprbound

import (
	"math"
	"math/big"
	"testing"
)

// TestCheckedIntegerOps compares the checked + - * and unary - with exact
// arithmetic on every pair of values around the limits: a result that fits
// in an int is that result, one that does not is refused.
func TestCheckedIntegerOps(t *testing.T) {
	t.Parallel()
	values := []int{
		math.MinInt, math.MinInt + 1, math.MinInt / 2, math.MinInt/2 - 1, -3037000500, -3037000499, -1 << 32, -3, -2, -1,
		0, 1, 2, 3, 1 << 32, 3037000499, 3037000500, math.MaxInt / 2, math.MaxInt/2 + 1, math.MaxInt - 1, math.MaxInt,
	}
	fits := func(b *big.Int) bool { return b.IsInt64() }
	ops := []struct {
		name  string
		fn    func(x, y int) (int, bool)
		exact func(z, x, y *big.Int) *big.Int
	}{
		{"+", addInt, (*big.Int).Add},
		{"-", subInt, (*big.Int).Sub},
		{"*", mulInt, (*big.Int).Mul},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			for _, x := range values {
				for _, y := range values {
					want := op.exact(new(big.Int), big.NewInt(int64(x)), big.NewInt(int64(y)))
					got, ok := op.fn(x, y)
					switch {
					case ok != fits(want):
						t.Errorf("%d %s %d: got ok %v, want %v (exact %v)", x, op.name, y, ok, fits(want), want)
					case ok && int64(got) != want.Int64():
						t.Errorf("%d %s %d: got %d, want %v", x, op.name, y, got, want)
					}
				}
			}
		})
	}
	for _, x := range values {
		want := new(big.Int).Neg(big.NewInt(int64(x)))
		got, ok := negInt(x)
		if ok != fits(want) || (ok && int64(got) != want.Int64()) {
			t.Errorf("-(%d): got %d, %v, want %v (fits: %v)", x, got, ok, want, fits(want))
		}
	}
}
