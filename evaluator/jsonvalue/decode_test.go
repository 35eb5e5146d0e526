package jsonvalue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/evaluator/jsonvalue"
)

// deep nests n arrays, or n objects under key "a" when obj is set, around
// a 1.
func deep(n int, obj bool) string {
	if obj {
		return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
	}
	return strings.Repeat("[", n) + "1" + strings.Repeat("]", n)
}

// manyKeys is an object with n distinct keys, larger than a map's first
// bucket, so sizing the map matters.
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteString(`,"k0":"again"}`)
	return b.String()
}

// cases are compared with encoding/json, value and error alike; valid is
// encoding/json's verdict, checked as well so that each case says what it
// is there for. They also seed FuzzDecode.
var cases = []struct {
	name  string
	in    string
	valid bool
}{
	// Literals and whitespace.
	{"null", "null", true},
	{"true", "true", true},
	{"false", "false", true},
	{"whitespace around", " \t\r\n true \n\t", true},
	{"empty input", "", false},
	{"only whitespace", " \n\t\r ", false},
	{"truncated null", "nul", false},
	{"truncated true", "tru", false},
	{"truncated false", "fals", false},
	{"misspelt null", "nulx", false},
	{"misspelt true", "trUe", false},
	{"capitalised", "True", false},
	{"literal then garbage", "nullx", false},
	{"form feed is not whitespace", "\f1", false},
	{"vertical tab is not whitespace", "1\v", false},
	{"NBSP is not whitespace", "\xc2\xa01", false},
	{"byte order mark", "\xef\xbb\xbf{}", false},
	{"NUL byte", "\x00", false},
	{"NUL after value", "[1]\x00", false},
	{"comment", "// c\n1", false},
	{"block comment", "/* c */ 1", false},

	// Numbers.
	{"zero", "0", true},
	{"negative zero", "-0", true},
	{"negative zero fraction", "-0.0", true},
	{"negative zero exponent", "-0e5", true},
	{"small int", "7", true},
	{"last cached int", "1023", true},
	{"first uncached int", "1024", true},
	{"negative int", "-42", true},
	{"fraction", "1.5", true},
	{"negative fraction exponent", "-1.5e10", true},
	{"capital E", "1E2", true},
	{"plus exponent", "1e+2", true},
	{"minus exponent", "1e-2", true},
	{"zero exponent", "0E-0", true},
	{"leading zero exponent", "1e007", true},
	{"tenth", "0.1", true},
	{"int with fraction zero", "5.0", true},
	{"2^53", "9007199254740992", true},
	{"2^53+1 rounds", "9007199254740993", true},
	{"2^53+1 fraction", "9007199254740993.0", true},
	{"19 digits", "9999999999999999999", true},
	{"2^64-1", "18446744073709551615", true},
	{"2^64", "18446744073709551616", true},
	{"23 digits", "12345678901234567890123", true},
	{"1e22 exact", "1e22", true},
	{"1e23 inexact", "1e23", true},
	{"fast path edge", "9007199254740992e22", true},
	{"fast path edge negative", "9007199254740992e-22", true},
	{"long fraction", "3.141592653589793238462643383279", true},
	{"many leading fraction zeros", "0.0000000000000000000000000001", true},
	{"big mantissa small exponent", "100000000000000000000000000000000000e-30", true},
	{"max float64", "1.7976931348623157e308", true},
	{"smallest denormal", "4.9e-324", true},
	{"rounds to smallest denormal", "3e-324", true},
	{"underflow to zero", "1e-400", true},
	{"negative underflow", "-1e-400", true},
	{"huge exponent on zero", "0e99999999999999999999999", true},
	{"huge negative exponent", "1e-99999999999999999999", true},
	{"exponent with many zeros", "1e0000000000000000000001", true},
	{"overflow", "1e400", false},
	{"negative overflow", "-1e400", false},
	{"just over max float64", "1.7976931348623159e308", false},
	{"huge exponent", "1e99999999999999999999", false},
	{"overflow in array", "[1e400, 1]", false},
	{"overflow in object", `{"a":1e309}`, false},
	{"overflow then syntax error", "[1e400, x]", false},
	{"two overflows", "[1e400, -1e500]", false},
	{"leading zero", "01", false},
	{"negative leading zero", "-01", false},
	{"double zero", "00", false},
	{"leading zero in array", "[01]", false},
	{"minus alone", "-", false},
	{"minus in array", "[-]", false},
	{"minus space", "- 1", false},
	{"plus sign", "+1", false},
	{"trailing dot", "1.", false},
	{"trailing dot in array", "[1.]", false},
	{"leading dot", ".5", false},
	{"dot exponent", "1.e5", false},
	{"empty exponent", "1e", false},
	{"empty exponent in array", "[1e]", false},
	{"empty signed exponent", "1e+", false},
	{"empty negative exponent", "1E-", false},
	{"double exponent", "1ee5", false},
	{"two dots", "1.5.2", false},
	{"hex", "0x10", false},
	{"NaN", "NaN", false},
	{"negative NaN", "-NaN", false},
	{"Infinity", "Infinity", false},
	{"negative Infinity", "-Infinity", false},
	{"two numbers", "1 2", false},
	{"number then letter", "12a", false},

	// Strings.
	{"empty string", `""`, true},
	{"plain string", `"hello, world"`, true},
	{"simple escapes", `"\"\\\/\b\f\n\r\t"`, true},
	{"unicode escapes", `"\u0041\u00e9\u20AC"`, true},
	{"escaped NUL", `"\u0000"`, true},
	{"surrogate pair", `"\ud83d\ude00"`, true},
	{"surrogate pair upper case", `"\uD83D\uDE00"`, true},
	{"lone high surrogate", `"\ud83d"`, true},
	{"lone low surrogate", `"\ude00"`, true},
	{"high surrogate then letter", `"\ud83dx"`, true},
	{"high surrogate then BMP escape", `"\ud83d\u0041"`, true},
	{"two high surrogates then low", `"\ud83d\ud83d\ude00"`, true},
	{"low then high surrogate", `"\ude00\ud83d"`, true},
	{"high surrogate then escaped backslash", `"\ud83d\\ude00"`, true},
	{"high surrogate then other escape", `"\ud83d\n"`, true},
	{"escaped replacement char", `"\uFFFD"`, true},
	{"noncharacter", `"\uFFFF"`, true},
	{"raw UTF-8", "\"h\u00e9llo \u4e16\u754c \U0001F600\"", true},
	{"raw replacement char", "\"\xef\xbf\xbd\"", true},
	{"DEL", "\"\x7f\"", true},
	{"apostrophe", `"it's"`, true},
	{"invalid byte", "\"\xff\"", true},
	{"invalid bytes", "\"a\xfe\xffb\"", true},
	{"truncated 2-byte", "\"\xc3\"", true},
	{"truncated 3-byte", "\"\xe2\x82\"", true},
	{"truncated 4-byte", "\"\xf0\x9f\x98\"", true},
	{"lone continuation", "\"\x80abc\"", true},
	{"UTF-8 surrogate", "\"\xed\xa0\x80\"", true},
	{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", true},
	{"overlong slash", "\"\xc0\xaf\"", true},
	{"invalid byte then escape", "\"a\xffb\\\"c\"", true},
	{"escape then invalid byte", "\"\\n\xff\xfe\"", true},
	{"many invalid bytes", "\"" + strings.Repeat("\xff", 100) + "\"", true},
	{"long string escape at end", `"` + strings.Repeat("abcdefgh", 64) + `\n"`, true},
	{"unterminated", `"abc`, false},
	{"unterminated after escape", `"abc\"`, false},
	{"unterminated escape", `"\`, false},
	{"unterminated unicode escape", `"\u12`, false},
	{"unterminated after unicode escape", `"\u1234`, false},
	{"unterminated after surrogate", `"\ud83d`, false},
	{"truncated pair", `"\ud83d\ude0"`, false},
	{"bad escape", `"\x41"`, false},
	{"escaped apostrophe", `"\'"`, false},
	{"escaped space", `"\ "`, false},
	{"bad hex", `"\u12G4"`, false},
	{"short hex", `"\u12"`, false},
	{"surrogate then bad hex", `"\ud83d\uZZZZ"`, false},
	{"upper U", `"\U0041"`, false},
	{"raw newline", "\"a\nb\"", false},
	{"raw tab", "\"a\tb\"", false},
	{"raw NUL", "\"\x00\"", false},
	{"raw unit separator", "\"\x1f\"", false},
	{"control char after escape", "\"\\n\x01\"", false},
	{"control char after invalid UTF-8", "\"\xff\x01\"", false},
	{"single quotes", `'a'`, false},
	{"two strings", `"a" "b"`, false},

	// Arrays.
	{"empty array", "[]", true},
	{"empty array with space", "[ \n ]", true},
	{"array", "[1,2,3]", true},
	{"array with space", " [ 1 , 2 ] ", true},
	{"nested arrays", "[[[]],[]]", true},
	{"mixed array", `[null,true,false,"x",-1.5,{},[],0]`, true},
	{"open array", "[", false},
	{"unterminated array", "[1", false},
	{"array trailing comma end", "[1,", false},
	{"array trailing comma", "[1,]", false},
	{"array leading comma", "[,1]", false},
	{"array only comma", "[,]", false},
	{"array missing comma", "[1 2]", false},
	{"array closed by brace", "[1}", false},
	{"extra bracket", "[]]", false},
	{"array then garbage", "[] x", false},
	{"array colon", "[1:2]", false},

	// Objects.
	{"empty object", "{}", true},
	{"empty object with space", "{ \t }", true},
	{"object", `{"a":1,"b":"two","c":[3]}`, true},
	{"object with space", ` { "a" : 1 , "b" : 2 } `, true},
	{"nested objects", `{"a":{"b":[1,{"c":null}]},"d":{}}`, true},
	{"empty key", `{"":0}`, true},
	{"duplicate key", `{"a":1,"a":2}`, true},
	{"duplicate key via escape", `{"\u0041":1,"A":2}`, true},
	{"duplicate replaced keys", `{"\ud800":1,"\ufffd":2}`, true},
	{"key with escapes", `{"a\"b\\c\u00e9":true}`, true},
	{"key with invalid UTF-8", "{\"\xff\":1}", true},
	{"many keys", manyKeys(40), true},
	{"open object", "{", false},
	{"object key only", `{"a"`, false},
	{"object after colon", `{"a":`, false},
	{"object after value", `{"a":1`, false},
	{"object trailing comma end", `{"a":1,`, false},
	{"object trailing comma", `{"a":1,}`, false},
	{"object leading comma", `{,"a":1}`, false},
	{"unquoted key", `{a:1}`, false},
	{"single quoted key", `{'a':1}`, false},
	{"number key", `{1:2}`, false},
	{"missing colon", `{"a" 1}`, false},
	{"missing value", `{"a":}`, false},
	{"missing comma", `{"a":1 "b":2}`, false},
	{"object closed by bracket", `{"a":1]`, false},
	{"extra brace", "{}}", false},
	{"bad key escape", `{"\q":1}`, false},
	{"control char in key", "{\"a\x02\":1}", false},

	// Depth.
	{"max depth arrays", deep(jsonvalue.MaxDepth, false), true},
	{"max depth objects", deep(jsonvalue.MaxDepth, true), true},
	{"too deep arrays", deep(jsonvalue.MaxDepth+1, false), false},
	{"too deep objects", deep(jsonvalue.MaxDepth+1, true), false},
	{"too deep unterminated", strings.Repeat("[", jsonvalue.MaxDepth+1), false},
	{"syntax error before too deep", "[x" + strings.Repeat("[", jsonvalue.MaxDepth+1), false},
}

func TestDecode(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := reference([]byte(c.in)); (err == nil) != c.valid {
				t.Fatalf("encoding/json says valid=%t (%v), the case says %t", err == nil, err, c.valid)
			}
			compare(t, []byte(c.in))
		})
	}
}

// TestNumbers compares many generated numbers with encoding/json, bit for
// bit, around the limits of the fast path: mantissas of up to 25 digits and
// exponents near ±22.
func TestNumbers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		return string(b)
	}
	for range 20000 {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteByte('-')
		}
		if rng.IntN(4) == 0 {
			b.WriteByte('0')
		} else {
			b.WriteByte(byte('1' + rng.IntN(9)))
			b.WriteString(digits(rng.IntN(20)))
		}
		if rng.IntN(2) == 0 {
			b.WriteString("." + digits(1+rng.IntN(20)))
		}
		if rng.IntN(2) == 0 {
			b.WriteString([]string{"e", "E", "e+", "e-"}[rng.IntN(4)] + fmt.Sprint(rng.IntN(30)))
		}
		compare(t, []byte(b.String()))
	}
}

// TestSyntaxError pins the error's shape; the table checks the rest.
func TestSyntaxError(t *testing.T) {
	_, err := jsonvalue.Decode([]byte(`{"a": [1, 2, x]}`))
	var se *jsonvalue.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T), want *SyntaxError", err, err)
	}
	want := "invalid character 'x' looking for beginning of value at offset 14"
	if se.Offset != 14 || err.Error() != want {
		t.Errorf("error %q (offset %d), want %q", err, se.Offset, want)
	}

	_, err = jsonvalue.Decode([]byte(`[1, 1e400]`))
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "1e400") {
		t.Errorf("out of range: error %v (%T), want a *SyntaxError naming the number", err, err)
	}
}

// TestVeryDeep checks that absurd nesting is an error, not a stack overflow.
func TestVeryDeep(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("[", 1<<20),
		strings.Repeat(`{"":`, 1<<18),
		strings.Repeat("[{\"a\":", 1<<18),
	} {
		_, err := jsonvalue.Decode([]byte(in))
		if err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
			t.Errorf("Decode(%.10q...) error = %v, want exceeded max depth", in, err)
		}
	}
}

// TestNoAliasing checks that the result shares no memory with the input.
func TestNoAliasing(t *testing.T) {
	data := []byte(`{"key":"value","list":["item"]}`)
	v, err := jsonvalue.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	want := map[string]any{"key": "value", "list": []any{"item"}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("after overwriting the input, value = %#v, want %#v", v, want)
	}
}

// TestConcurrent decodes different documents at once, for the race
// detector and to check that pooled decoders share nothing visible.
func TestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 50 {
				in := fmt.Sprintf(`{"g":%d,"n":%d,"s":"v%d","l":["x%d",{"k%d":null}]}`, g, n, g, n, g)
				want := map[string]any{"g": float64(g), "n": float64(n), "s": fmt.Sprint("v", g),
					"l": []any{fmt.Sprint("x", n), map[string]any{fmt.Sprint("k", g): nil}}}
				got, err := jsonvalue.Decode([]byte(in))
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("Decode(%s) = %#v, %v", in, got, err)
					return
				}
				if _, err := jsonvalue.Decode([]byte(in[:len(in)-3])); err == nil {
					t.Errorf("Decode(%s) succeeded", in[:len(in)-3])
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzDecode checks Decode against encoding/json on arbitrary input: the
// same verdict, the same value, the same syntax error.
func FuzzDecode(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		compare(t, data)
	})
}

func reference(data []byte) (any, error) {
	var v any
	err := json.Unmarshal(data, &v)
	return v, err
}

// compare decodes data with Decode and with encoding/json and fails t
// unless they agree.
func compare(t *testing.T, data []byte) {
	t.Helper()
	in := data
	if len(in) > 200 {
		in = in[:200] // keep messages readable; the case name says which
	}
	got, err := jsonvalue.Decode(data)
	want, wantErr := reference(data)
	switch {
	case err == nil && wantErr != nil:
		t.Fatalf("Decode(%q) = %#v, nil; encoding/json fails with %v", in, got, wantErr)
	case err != nil && wantErr == nil:
		t.Fatalf("Decode(%q) fails with %v; encoding/json gives %#v", in, err, want)
	case err != nil:
		var se *jsonvalue.SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("Decode(%q) error %v is a %T, want *SyntaxError", in, err, err)
		}
		if got != nil {
			t.Errorf("Decode(%q) = %#v with an error, want nil", in, got)
		}
		if want := fmt.Sprintf("%s at offset %d", se.Msg, se.Offset); err.Error() != want {
			t.Errorf("Decode(%q) error %q, want %q", in, err, want)
		}
		var jse *json.SyntaxError
		var jte *json.UnmarshalTypeError
		switch {
		case errors.As(wantErr, &jse):
			if exactErrors && (se.Msg != jse.Error() || se.Offset != jse.Offset) {
				t.Errorf("Decode(%q) error %q at %d; encoding/json: %q at %d", in, se.Msg, se.Offset, jse.Error(), jse.Offset)
			}
		case errors.As(wantErr, &jte):
			if !strings.Contains(se.Msg, "out of range") {
				t.Errorf("Decode(%q) error %q; encoding/json: %v", in, se.Msg, wantErr)
			}
		default:
			t.Fatalf("encoding/json error %v is a %T, which the test does not know", wantErr, wantErr)
		}
	default:
		if !reflect.DeepEqual(got, want) || !identical(got, want) {
			t.Errorf("Decode(%q) = %#v; encoding/json gives %#v", in, got, want)
		}
	}
}

// identical is reflect.DeepEqual made stricter for JSON values: floats must
// have the same bits, so that -0 and 0 differ.
func identical(a, b any) bool {
	switch a := a.(type) {
	case float64:
		b, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !identical(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !identical(v, w) {
				return false
			}
		}
		return true
	case nil, bool, string:
		return a == b
	}
	return false
}
