package jsonvalue

// A Lexer reads a document token by token for a caller that knows the
// shape it expects, decoding strings as Decode does. It does not report
// errors: a method that meets anything but what it was asked for returns
// false, and the caller falls back to Decode, which explains.
type Lexer struct {
	d decoder
	i int
}

// NewLexer starts reading data.
func NewLexer(data []byte) *Lexer {
	l := &Lexer{}
	l.d.data = data
	return l
}

// Delim consumes c ('{', '}', '[', ']', ':' or ',') after any whitespace.
func (l *Lexer) Delim(c byte) bool {
	i := skipSpace(l.d.data, l.i)
	if i >= len(l.d.data) || l.d.data[i] != c {
		return false
	}
	l.i = i + 1
	return true
}

// String consumes a string after any whitespace and returns it decoded.
func (l *Lexer) String() (string, bool) {
	i := skipSpace(l.d.data, l.i)
	if i >= len(l.d.data) || l.d.data[i] != '"' {
		return "", false
	}
	b, j := l.d.stringBytes(i)
	if j < 0 {
		return "", false
	}
	l.i = j
	return string(b), true
}

// End reports whether only whitespace is left.
func (l *Lexer) End() bool { return skipSpace(l.d.data, l.i) == len(l.d.data) }
