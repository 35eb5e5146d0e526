package jsonvalue

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestSpecialMask checks the word-at-a-time scan of strings against a plain
// byte loop: it must flag a word exactly when some byte is not plain, and
// its lowest flag must be the first such byte.
func TestSpecialMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	interesting := []byte{0x00, 0x01, 0x1f, ' ', '!', '"', '#', '[', '\\', ']', 'a', 0x7f, 0x80, 0xbf, 0xc3, 0xff}
	var w [8]byte
	for n := range 200000 {
		for k := range w {
			if n%2 == 0 {
				w[k] = interesting[rng.IntN(len(interesting))]
			} else {
				w[k] = byte(rng.IntN(256))
			}
		}
		first := -1
		for k, c := range w {
			if !plain[c] {
				first = k
				break
			}
		}
		m := specialMask(binary.LittleEndian.Uint64(w[:]))
		if first < 0 && m != 0 || first >= 0 && bits.TrailingZeros64(m)/8 != first {
			t.Fatalf("specialMask(%q) = %#x, first special byte at %d", w, m, first)
		}
	}
}
