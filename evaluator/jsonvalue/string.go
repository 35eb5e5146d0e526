package jsonvalue

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// plain marks the ASCII bytes a string literal copies unchanged: all but
// the quote, the backslash and the control characters, which JSON forbids
// unescaped. Bytes from 0x80 up are false so that UTF-8 gets checked.
var plain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// specialMask flags the bytes packed in w (little-endian) that are not
// plain: quotes, backslashes, control characters and bytes from 0x80 up.
// It uses the bit trick that (x - 0x01…01*n) & ^x & 0x80…80 flags the bytes
// of x below n (for n <= 0x80), where a borrow can wrongly flag only a byte
// above a rightly flagged one; a byte equal to q is a byte of
// x^(0x01…01*q) below 1. So the lowest flag is always right.
func specialMask(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ ones*'"'
	backslash := w ^ ones*'\\'
	return ((w-ones*' ')&^w | (quote-ones)&^quote | (backslash-ones)&^backslash | w) & highs
}

// stringBytes reads the string literal whose '"' is at data[i] and returns
// its decoded bytes and the index after the closing quote. The bytes alias
// data, or d.buf when the literal needed decoding, so they are valid only
// until the next call: callers copy them into a string.
func (d *decoder) stringBytes(i int) ([]byte, int) {
	data := d.data
	start := i + 1
	// Most strings are valid UTF-8 without escapes: find the closing quote
	// and return the literal's own bytes.
	for j := start; j < len(data); {
		// Look at eight bytes at a time, and go straight to the first one
		// that is not plain ASCII.
		if j+8 <= len(data) {
			m := specialMask(binary.LittleEndian.Uint64(data[j:]))
			if m == 0 {
				j += 8
				continue
			}
			j += bits.TrailingZeros64(m) / 8
		}
		c := data[j]
		if plain[c] {
			j++
			continue
		}
		if c == '"' {
			return data[start:j], j + 1
		}
		if c < utf8.RuneSelf {
			return d.unescape(start, j) // a backslash or a control character
		}
		r, size := utf8.DecodeRune(data[j:])
		if r == utf8.RuneError && size == 1 {
			return d.unescape(start, j) // invalid UTF-8, to be replaced
		}
		j += size
	}
	return nil, d.failExpect(len(data), "in string literal")
}

// unescape decodes the rest of the string literal whose contents start at
// data[start], from data[j] on: the bytes before j need no decoding. It follows
// encoding/json's unquote byte for byte, including how it replaces bad
// UTF-8 and bad surrogates with U+FFFD.
func (d *decoder) unescape(start, j int) ([]byte, int) {
	data := d.data
	b := append(d.buf[:0], data[start:j]...)
	defer func() { d.buf = b[:0] }() // keep the grown buffer for the next string
	for j < len(data) {
		c := data[j]
		switch {
		case plain[c]:
			k := j + 1
			for k < len(data) && plain[data[k]] {
				k++
			}
			b = append(b, data[j:k]...)
			j = k
		case c == '"':
			return b, j + 1
		case c == '\\':
			j++
			if j >= len(data) {
				return nil, d.failToken(j, "in string escape code")
			}
			switch e := data[j]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(data, j+1)
				if !ok {
					return nil, d.failHex(j + 1)
				}
				j += 4
				if utf16.IsSurrogate(r) {
					// Like encoding/json: a surrogate pairs with an
					// immediately following \uXXXX escape if the two form
					// a valid pair; otherwise it alone becomes U+FFFD and
					// whatever follows is decoded on its own.
					r2, ok := u4(data, j+1)
					if r = utf16.DecodeRune(r, r2); ok && r != utf8.RuneError {
						j += 6
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return nil, d.failToken(j, "in string escape code")
			}
			j++
		case c < ' ':
			return nil, d.failExpect(j, "in string literal")
		default:
			// Bytes from 0x80 up: a valid UTF-8 sequence is copied as is,
			// each byte of an invalid one becomes U+FFFD (DecodeRune
			// reports those one byte at a time, as encoding/json uses it).
			r, size := utf8.DecodeRune(data[j:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, r)
			} else {
				b = append(b, data[j:j+size]...)
			}
			j += size
		}
	}
	return nil, d.failExpect(j, "in string literal")
}

// failHex records an error for the first byte from data[i] on that is not
// one of the four hex digits of a \u escape.
func (d *decoder) failHex(i int) int {
	for k := i; k < i+4; k++ {
		if k >= len(d.data) || unhex(d.data[k]) < 0 {
			return d.failToken(k, `in \u hexadecimal character escape`)
		}
	}
	panic("jsonvalue: bad \\u escape not found") // unreachable: hex4 failed
}

// u4 decodes a \uXXXX escape at data[i], if there is one.
func u4(data []byte, i int) (rune, bool) {
	if i+1 >= len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	return hex4(data, i+2)
}

// hex4 decodes the four hex digits at data[i].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		v := unhex(c)
		if v < 0 {
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}

func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}
