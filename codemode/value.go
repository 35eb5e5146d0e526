package codemode

import (
	"math"
	"reflect"
	"strconv"
)

// maxDepth bounds how deep a value nests.
const maxDepth = 1_000

// jsonValue turns a value the program or a tool produced into JSON types
// (numbers as float64, arrays as []any, objects as map[string]any),
// refusing one whose JSON would be over limit bytes before building it: a
// value of shared parts, small in memory, may be huge as JSON.
func jsonValue(v any, limit int) (any, error) {
	w := walker{limit: limit}
	return w.value(v, 0)
}

type walker struct {
	limit, size int
}

func (w *walker) grow(n int) error {
	w.size += n
	if w.size > w.limit {
		return budgetError(BudgetResult, "the value is over the limit of %d bytes of JSON", w.limit)
	}
	return nil
}

func (w *walker) value(v any, depth int) (any, error) {
	if err := w.grow(4); err != nil {
		return nil, err
	}
	if depth > maxDepth {
		return nil, errorf(ExpressionRuntime, "the value is nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool:
		return v, nil
	case string:
		return x, w.grow(len(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errorf(ExpressionRuntime, "%v is not a JSON number", x)
		}
		return x, nil
	case int:
		return float64(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := w.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if err := w.grow(len(k) + 4); err != nil {
				return nil, err
			}
			c, err := w.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	return w.reflected(reflect.ValueOf(v), depth)
}

func (w *walker) reflected(rv reflect.Value, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return w.value(rv.Float(), depth)
	case reflect.String:
		return w.value(rv.String(), depth)
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			// Bytes (a stream's raw chunk) become a string, as JSON would
			// not carry them otherwise.
			return w.value(string(rv.Bytes()), depth)
		}
		out := make([]any, rv.Len())
		for i := range out {
			c, err := w.value(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, errorf(ExpressionRuntime, "a map with keys of type %s is not a JSON object", rv.Type().Key())
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := it.Key().String()
			if err := w.grow(len(k) + 4); err != nil {
				return nil, err
			}
			c, err := w.value(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return w.value(rv.Elem().Interface(), depth)
	}
	return nil, errorf(ExpressionRuntime, "a value of type %s is not JSON", rv.Type())
}

// kind names a value's JSON type, for messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64, int:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return strconv.Quote(reflect.TypeOf(v).String())
}
