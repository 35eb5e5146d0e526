package httptransport

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestJSStringAndEncoding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    any
		want string
	}{
		{1.0, "1"}, {2.5, "2.5"}, {1e21, "1e+21"}, {0.0000001, "1e-7"}, {-0.5, "-0.5"},
		{true, "true"}, {nil, "null"}, {[]any{1.0, "a", nil}, "1,a,"}, {map[string]any{"k": 1.0}, `{"k":1}`},
	}
	for _, tc := range cases {
		if got := jsString(tc.v); got != tc.want {
			t.Errorf("jsString(%#v): got %q, want %q", tc.v, got, tc.want)
		}
	}
	if got, want := encodeURIComponent("u 42/x?&=é!*'()~"), "u%2042%2Fx%3F%26%3D%C3%A9!*'()~"; got != want {
		t.Errorf("encodeURIComponent: got %q, want %q", got, want)
	}
	if got, want := axiosEncode("a b:$,[]&é"), "a+b:$,[]%26%C3%A9"; got != want {
		t.Errorf("axiosEncode: got %q, want %q", got, want)
	}
}

func TestReadLineLimit(t *testing.T) {
	t.Parallel()
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 20)+"\nok\n"), 16)
	if _, err := readLine(br, 10); err != errLineTooLong {
		t.Errorf("a 20-byte line with limit 10: got %v, want errLineTooLong", err)
	}
	br = bufio.NewReaderSize(strings.NewReader("0123456789\nlast"), 16)
	if l, err := readLine(br, 11); err != nil || string(l) != "0123456789" {
		t.Errorf("a line at the limit: got %q %v", l, err)
	}
	if l, err := readLine(br, 11); err != io.EOF || string(l) != "last" {
		t.Errorf("last line without an ending: got %q %v, want last and io.EOF", l, err)
	}
}
