package redact

import (
	"encoding/json"
	"math"
	"strconv"
)

// MaxTokenBytes bounds a token Token accepts.
const MaxTokenBytes = 64

// MaxPartBytes bounds a part of a token (between '_', '-' and '.') that
// mixes letters and digits, or is made of digits only.
const MaxPartBytes = 6

// Token reports whether s may be shown as an upstream error's type or
// code (see the package's documentation).
func Token(s string) bool {
	if len(s) == 0 || len(s) > MaxTokenBytes {
		return false
	}
	alnum, dots, onlyDigitsAndDots := false, 0, true
	digits, part := false, 0 // the part read so far holds a digit; its length
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '_' || s[i] == '-' || s[i] == '.' {
			if digits && part > MaxPartBytes {
				return false
			}
			digits, part = false, 0
			if i < len(s) && s[i] != '.' {
				onlyDigitsAndDots = false
			} else if i < len(s) {
				dots++
			}
			continue
		}
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			onlyDigitsAndDots = false
		default:
			return false
		}
		alnum = true
		part++
	}
	return alnum && !(onlyDigitsAndDots && dots > 1)
}

// Fields returns what may be shown of a decoded JSON error body: its
// "type" and "code" (see the package's documentation), or nil when
// neither may be. hidden, when not nil, refuses a candidate that must not
// be shown whatever its form (a value bound to the manual).
func Fields(parsed any, hidden func(string) bool) map[string]any {
	obj, ok := parsed.(map[string]any)
	if !ok {
		return nil
	}
	nested, _ := obj["error"].(map[string]any)
	typ := first(text, nested["type"], obj["type"])
	code := first(codeText, nested["code"], obj["code"], obj["error"])
	var out map[string]any
	for _, f := range []struct{ key, value string }{{"type", typ}, {"code", code}} {
		if !Token(f.value) || (hidden != nil && hidden(f.value)) {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[f.key] = f.value
	}
	return out
}

// first is the first of vs that as reads, "" when none does.
func first(as func(any) (string, bool), vs ...any) string {
	for _, v := range vs {
		if s, ok := as(v); ok {
			return s
		}
	}
	return ""
}

// text reads a JSON string.
func text(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// codeText reads a JSON string or an integral number (a status-like
// code: 400, -32600), in digits.
func codeText(v any) (string, bool) {
	switch n := v.(type) {
	case string:
		return n, true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1e15 {
			return strconv.FormatFloat(n, 'f', -1, 64), true
		}
	case json.Number:
		if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return string(n), true
		}
	}
	return "", false
}
