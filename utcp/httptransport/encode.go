package httptransport

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// queryBuilder writes a query string the way axios serialises params:
// arrays as k[]=v, objects as k[sub]=v, booleans as true/false, nulls
// dropped, and axios's encoding (space as +, `:$,[]` kept).
type queryBuilder struct {
	b strings.Builder
}

func (q *queryBuilder) add(k, v string) {
	if q.b.Len() > 0 {
		q.b.WriteByte('&')
	}
	q.b.WriteString(axiosEncode(k))
	q.b.WriteByte('=')
	q.b.WriteString(axiosEncode(v))
}

func (q *queryBuilder) addValue(key string, v any) {
	switch x := v.(type) {
	case nil:
	case []any:
		for _, e := range x {
			switch e.(type) {
			case nil:
			case []any, map[string]any:
				raw, _ := json.Marshal(e)
				q.add(key+"[]", string(raw))
			default:
				q.add(key+"[]", jsString(e))
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			q.addValue(key+"["+k+"]", x[k])
		}
	default:
		q.add(key, jsString(v))
	}
}

// jsString renders a value as JavaScript's String() does for scalars; arrays
// are joined with commas (as String([1,2]) is "1,2") and objects are JSON.
func jsString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			if f, err := x.Float64(); err == nil {
				return jsNumber(f)
			}
		}
		return string(x)
	case float64:
		return jsNumber(x)
	case float32:
		return jsNumber(float64(x))
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil {
				parts[i] = jsString(e)
			}
		}
		return strings.Join(parts, ",")
	default:
		raw, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(raw)
	}
}

// jsNumber formats a float as JavaScript does for the common cases: integers
// without a fraction, others in the shortest form.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == math.Trunc(f) && math.Abs(f) < 1e21:
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	a := math.Abs(f)
	if a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	// Go writes e-07 where JavaScript writes e-7.
	s = strings.Replace(s, "e-0", "e-", 1)
	s = strings.Replace(s, "e+0", "e+", 1)
	return s
}

const upperhex = "0123456789ABCDEF"

// encodeURIComponent is JavaScript's: everything but A-Z a-z 0-9 - _ . ! ~ * ' ( )
// is percent-encoded as UTF-8.
func encodeURIComponent(s string) string {
	return percentEncode(s, func(c byte) bool { return jsUnreserved(c) }, false)
}

// axiosEncode is axios's param encoder: encodeURIComponent, then `:`, `$`,
// `,`, `[`, `]` put back and spaces written as `+`.
func axiosEncode(s string) string {
	return percentEncode(s, func(c byte) bool {
		return jsUnreserved(c) || c == ':' || c == '$' || c == ',' || c == '[' || c == ']'
	}, true)
}

func jsUnreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '!' || c == '~' || c == '*' || c == '\'' || c == '(' || c == ')'
}

func percentEncode(s string, keep func(byte) bool, spacePlus bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !keep(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case keep(c):
			b.WriteByte(c)
		case c == ' ' && spacePlus:
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(upperhex[c>>4])
			b.WriteByte(upperhex[c&15])
		}
	}
	return b.String()
}
