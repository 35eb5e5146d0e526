package jsonvalue

import "strconv"

// smallInts holds boxed float64s for the small non-negative integers that
// fill documents (counts, quantities, flags, indexes), so that decoding one
// does not allocate. Boxed values are immutable, so sharing them is safe.
var smallInts = func() (t [1024]any) {
	for i := range t {
		t[i] = float64(i)
	}
	return t
}()

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// number decodes the number starting at data[i] (a '-' or a digit),
// checking it against the JSON grammar as encoding/json's scanner does:
//
//	-? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?
//
// A '0' followed by more digits is left for the caller to reject, which is
// where encoding/json rejects it too.
func (d *decoder) number(i int) (any, int) {
	data := d.data
	start := i
	neg := data[i] == '-'
	if neg {
		i++
	}

	// Gather the decimal digits into mant (meaningful while there are at
	// most 19 of them) and the power of ten that scales it into exp.
	var mant uint64
	var digits, exp int
	integer := true // no fraction, no exponent
	if i >= len(data) || data[i]-'0' > 9 {
		return nil, d.failToken(i, "in numeric literal")
	}
	if data[i] == '0' {
		i++
		digits = 1
	} else {
		from := i
		for ; i < len(data) && data[i]-'0' <= 9; i++ {
			mant = mant*10 + uint64(data[i]-'0')
		}
		digits = i - from
	}
	if i < len(data) && data[i] == '.' {
		integer = false
		i++
		from := i
		for ; i < len(data) && data[i]-'0' <= 9; i++ {
			mant = mant*10 + uint64(data[i]-'0')
		}
		if i == from {
			return nil, d.failToken(i, "after decimal point in numeric literal")
		}
		digits += i - from
		exp = from - i
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		integer = false
		i++
		expNeg := false
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			expNeg = data[i] == '-'
			i++
		}
		from := i
		e := 0
		for ; i < len(data) && data[i]-'0' <= 9; i++ {
			if e < 1e6 { // beyond that only strconv's answer matters, and it reads the text
				e = e*10 + int(data[i]-'0')
			}
		}
		if i == from {
			return nil, d.failToken(i, "in exponent of numeric literal")
		}
		if expNeg {
			e = -e
		}
		exp += e
	}

	// Clinger's fast path: when the digits and the power of ten are both
	// exact float64s, one multiplication or division rounds correctly, so
	// the result is the one strconv.ParseFloat returns.
	if digits <= 19 && mant <= 1<<53 && -22 <= exp && exp <= 22 {
		if integer && !neg && mant < uint64(len(smallInts)) {
			return smallInts[mant], i
		}
		f := float64(mant)
		if exp < 0 {
			f /= pow10[-exp]
		} else {
			f *= pow10[exp]
		}
		if neg {
			f = -f // -0 stays negative, as strconv makes it
		}
		return f, i
	}

	// Everything else (long mantissas, big exponents) goes to strconv, as in
	// encoding/json. A string of at most 32 bytes does not allocate here.
	f, err := strconv.ParseFloat(string(data[start:i]), 64)
	if err != nil {
		// The grammar is checked, so this is ErrRange: the number is beyond
		// float64. Note it and go on, since a syntax error further on takes
		// precedence in encoding/json.
		if d.rangeErr == nil {
			d.rangeErr = &SyntaxError{Offset: int64(i), Msg: "number " + abbreviate(data[start:i]) + " is out of range of float64"}
		}
		return nil, i
	}
	return f, i
}

// abbreviate shortens a long literal for an error message.
func abbreviate(b []byte) string {
	const limit = 40
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
