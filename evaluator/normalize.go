package evaluator

import (
	"fmt"
	"math"
	"reflect"
	"time"
	"unicode/utf8"
)

// normalize turns a value expr produced into JSON types, enforcing the
// string and array limits. It returns v itself when nothing needs to change,
// so normalising a subtree of the state allocates nothing.
func normalize(v any, b *Budgets) (any, error) {
	n := normalizer{b: b}
	out, _, err := n.value(v, 0)
	return out, err
}

// normalizer walks one value. size estimates the value's JSON bytes, so a
// value built of shared parts, small in memory and huge as JSON, is refused
// before anything renders it.
type normalizer struct {
	b    *Budgets
	size int
}

func (n *normalizer) grow(bytes int) error {
	n.size += bytes
	if n.size > n.b.MaxValueBytes {
		return budgetError(BudgetValue, "the value is over the limit of %d bytes of JSON", n.b.MaxValueBytes)
	}
	return nil
}

const maxValueDepth = 1_000

func (n *normalizer) value(v any, depth int) (any, bool, error) {
	b := n.b
	if err := n.grow(8); err != nil {
		return nil, false, err
	}
	if depth > maxValueDepth {
		return nil, false, errorf(ExpressionRuntime, "value is nested deeper than %d levels", maxValueDepth)
	}
	switch x := v.(type) {
	case nil, bool:
		return v, false, nil
	case int:
		// JSON numbers are float64, as decoded state and client results are:
		// functions and later steps see one kind of number.
		return float64(x), true, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false, errorf(ExpressionRuntime, "value %v is not a JSON number", x)
		}
		return v, false, nil
	case string:
		if err := n.grow(len(x)); err != nil {
			return nil, false, err
		}
		if len(x) > b.MaxStringLength && utf8.RuneCountInString(x) > b.MaxStringLength {
			return nil, false, budgetError(BudgetString, "a string of %d characters is over the limit of %d", utf8.RuneCountInString(x), b.MaxStringLength)
		}
		return v, false, nil
	case []any:
		if len(x) > b.MaxArrayLength {
			return nil, false, budgetError(BudgetArray, "an array of %d items is over the limit of %d", len(x), b.MaxArrayLength)
		}
		var out []any
		for i, item := range x {
			nv, changed, err := n.value(item, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = make([]any, len(x))
				copy(out, x[:i])
			}
			if out != nil {
				out[i] = nv
			}
		}
		if out == nil {
			return v, false, nil
		}
		return out, true, nil
	case map[string]any:
		var out map[string]any
		for k, item := range x {
			if err := n.grow(len(k)); err != nil {
				return nil, false, err
			}
			nv, changed, err := n.value(item, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = make(map[string]any, len(x))
				for k, v := range x {
					out[k] = v
				}
			}
			if out != nil {
				out[k] = nv
			}
		}
		if out == nil {
			return v, false, nil
		}
		return out, true, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, false, errorf(ExpressionRuntime, "a map key %v (%T) is not a string: JSON objects have string keys", k, k)
			}
			nv, _, err := n.value(item, depth+1)
			if err != nil {
				return nil, false, err
			}
			out[ks] = nv
		}
		return out, true, nil
	case time.Time:
		return x.Format(time.RFC3339Nano), true, nil
	case time.Duration:
		return x.String(), true, nil
	}
	return n.reflected(v, depth)
}

// reflected handles the other numbers and the typed slices and maps
// that builtins return ([]string from split, map[string]int, ...).
func (n *normalizer) reflected(v any, depth int) (any, bool, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true, nil
	case reflect.Float32:
		nv, _, err := n.value(rv.Float(), depth)
		return nv, true, err
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		nv, _, err := n.value(out, depth)
		return nv, true, err
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.Interface && !k.IsNil() {
				k = k.Elem()
			}
			if k.Kind() != reflect.String {
				return nil, false, errorf(ExpressionRuntime, "a map key %v (%s) is not a string: JSON objects have string keys", k, k.Type())
			}
			out[k.String()] = it.Value().Interface()
		}
		nv, _, err := n.value(out, depth)
		return nv, true, err
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, true, nil
		}
		return n.value(rv.Elem().Interface(), depth)
	}
	return nil, false, errorf(ExpressionRuntime, "a value of type %s cannot be written as JSON", typeName(v))
}

func typeName(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}
