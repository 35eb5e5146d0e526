package exprbound

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxDepth bounds how deep a normalised value nests.
const MaxDepth = 1_000

// What the estimate of a value's JSON counts: each value (null, true, a
// short number, a string's quotes, a container's brackets, with its comma)
// and each object key besides its own bytes (its quotes, colon and comma).
// The estimate refuses a value built of shared parts, small in memory and
// huge as JSON, before anything renders it.
const (
	valueBytes = 4
	keyBytes   = 4
)

// ValueLimits bound a value being normalised.
type ValueLimits struct {
	// MaxBytes bounds the estimate of the value's JSON, in bytes.
	MaxBytes int
	// MaxString bounds a string, in characters, and MaxArray an array, in
	// items; 0 bounds neither.
	MaxString, MaxArray int
}

// ValueLimit names what a [ValueError] refused.
type ValueLimit int

// The refusals of a value.
const (
	// NotJSON: NaN or ±Inf, a map key that is not a string, a Go type
	// JSON has no form for, nesting deeper than MaxDepth.
	NotJSON ValueLimit = iota
	OverBytes
	OverString
	OverArray
)

// ValueError is a value Normalize refused; its message is worded for the
// model.
type ValueError struct {
	Over    ValueLimit
	Message string
}

func (e *ValueError) Error() string { return e.Message }

func valueError(over ValueLimit, format string, args ...any) *ValueError {
	return &ValueError{Over: over, Message: fmt.Sprintf(format, args...)}
}

// Normalize turns a value a program, a host function or a tool produced
// into JSON types: numbers as float64, arrays as []any, objects as
// map[string]any (expr's map[any]any of fromPairs and groupBy too, when its
// keys are strings), times as RFC 3339 text and bytes as a string. It
// returns v itself when nothing needs to change, so normalising a subtree of
// a state allocates nothing; a caller must not change what it returns. Its
// error is a *ValueError.
func Normalize(v any, l ValueLimits) (any, error) {
	n := Normalizer{Limits: l}
	return n.Normalize(v)
}

// Normalizer normalises values one after the other under one MaxBytes:
// the chunks of a stream together. The zero value bounds nothing but depth.
type Normalizer struct {
	Limits ValueLimits
	size   int
}

// Normalize is [Normalize] counting v's bytes with those of the values n
// normalised before.
func (n *Normalizer) Normalize(v any) (any, error) {
	out, _, err := n.value(v, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (n *Normalizer) grow(bytes int) error {
	n.size += bytes
	if n.Limits.MaxBytes > 0 && n.size > n.Limits.MaxBytes {
		return valueError(OverBytes, "the value is over the limit of %d bytes of JSON", n.Limits.MaxBytes)
	}
	return nil
}

// value returns v in JSON types and whether that is another value than v.
func (n *Normalizer) value(v any, depth int) (any, bool, error) {
	if err := n.grow(valueBytes); err != nil {
		return nil, false, err
	}
	if depth > MaxDepth {
		return nil, false, valueError(NotJSON, "value is nested deeper than %d levels", MaxDepth)
	}
	return n.convert(v, depth)
}

// convert is value once v is counted.
func (n *Normalizer) convert(v any, depth int) (any, bool, error) {
	switch x := v.(type) {
	case nil, bool:
		return v, false, nil
	case int:
		// JSON numbers are float64, as decoded states and tool results are:
		// functions, tools and later steps see one kind of number.
		return float64(x), true, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false, valueError(NotJSON, "value %v is not a JSON number", x)
		}
		return v, false, nil
	case string:
		if err := n.grow(len(x)); err != nil {
			return nil, false, err
		}
		if max := n.Limits.MaxString; max > 0 && len(x) > max && utf8.RuneCountInString(x) > max {
			return nil, false, valueError(OverString, "a string of %d characters is over the limit of %d", utf8.RuneCountInString(x), max)
		}
		return v, false, nil
	case []any:
		if x == nil {
			return []any{}, true, nil // concat([], []): JSON's [], never null
		}
		if max := n.Limits.MaxArray; max > 0 && len(x) > max {
			return nil, false, valueError(OverArray, "an array of %d items is over the limit of %d", len(x), max)
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
		if x == nil {
			return map[string]any{}, true, nil
		}
		var out map[string]any
		for k, item := range x {
			if err := n.grow(len(k) + keyBytes); err != nil {
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
				return nil, false, valueError(NotJSON, "a map key %v (%T) is not a string: JSON objects have string keys", k, k)
			}
			if err := n.grow(len(ks) + keyBytes); err != nil {
				return nil, false, err
			}
			nv, _, err := n.value(item, depth+1)
			if err != nil {
				return nil, false, err
			}
			out[ks] = nv
		}
		return out, true, nil
	case time.Time:
		// Text like any string: counted, and bounded by MaxString.
		nv, _, err := n.convert(x.Format(time.RFC3339Nano), depth)
		return nv, true, err
	case time.Duration:
		nv, _, err := n.convert(x.String(), depth)
		return nv, true, err
	}
	return n.reflected(v, depth)
}

// reflected handles the other numbers, strings and booleans, bytes, and the
// typed slices and maps that builtins and Go functions return ([]string
// from split, map[string]int, ...).
func (n *Normalizer) reflected(v any, depth int) (any, bool, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true, nil
	case reflect.Float32, reflect.Float64:
		nv, _, err := n.convert(rv.Float(), depth)
		return nv, true, err
	case reflect.String:
		nv, _, err := n.convert(rv.String(), depth)
		return nv, true, err
	case reflect.Bool:
		return rv.Bool(), true, nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			// Bytes (a stream's raw chunk) are text: JSON has no bytes.
			nv, _, err := n.convert(string(rv.Bytes()), depth)
			return nv, true, err
		}
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		nv, _, err := n.convert(out, depth)
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
				return nil, false, valueError(NotJSON, "a map key %v (%s) is not a string: JSON objects have string keys", k, k.Type())
			}
			out[k.String()] = it.Value().Interface()
		}
		nv, _, err := n.convert(out, depth)
		return nv, true, err
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, true, nil
		}
		// A level deeper: pointers that form a cycle stop at MaxDepth.
		nv, _, err := n.value(rv.Elem().Interface(), depth+1)
		return nv, true, err
	}
	return nil, false, valueError(NotJSON, "a value of type %s cannot be written as JSON", typeName(v))
}

func typeName(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}

// Kind names a value's JSON type, for messages: "an object", "a number";
// a value of another Go type by its type.
func Kind(v any) string {
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

// Size is the bytes of JSON of the values n normalised, as counted
// against MaxBytes.
func (n *Normalizer) Size() int { return n.size }
