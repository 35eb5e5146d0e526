package evaluator

import (
	"bytes"

	"github.com/exprd/exprd/evaluator/jsonvalue"
)

// What a state holds in Go's memory, which its reservation in the memory
// budget follows (State.UseMemory). It is counted by the values a state is
// made of, not by its bytes of JSON: `{"a":1}` is 8 bytes of JSON and 344
// of Go (a map takes a group of eight slots, 336 bytes, however few it
// holds), a long string about its own bytes. A count by bytes and
// containers alone (8 a byte, 64 a container) reserved 0.37 times what a
// state of small objects held, and twice what a state of products held.
//
// The costs are upper bounds of what Go 1.26 allocates on 64 bits,
// measured (TestFootprintHoldsTheRuntime holds them to the runtime for
// states of every shape): an allocation of n bytes takes at most a
// quarter more (its size class, or its pages past 32 KiB); a map of n
// entries its swiss tables; a value in an interface (a string's header,
// a float64, a slice's header) a box of its own.

// roundUp bounds what the allocator takes for n bytes.
func roundUp(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return n + n/4 + 16
}

// mapCost bounds a map[string]any of n entries, without its keys' bytes
// and its values' own memory: its header and one group of 8 slots up to 8
// entries (336 bytes measured), then tables of a power of two slots, at
// most 7/8 full, of 33 bytes a slot (42 with their size class), up to
// 1,024 slots a table, past which the map grows by tables (82-87 bytes an
// entry measured).
func mapCost(n int) int64 {
	switch {
	case n == 0:
		return 48
	case n <= 8:
		return 336
	case n <= 896:
		slots := int64(16)
		for slots*7 < int64(n)*8 {
			slots *= 2
		}
		return 42*slots + 256
	default:
		return 88*int64(n) + 1024
	}
}

// sliceCost bounds a []any of n items in an interface, without the items'
// own memory: its boxed header and its backing array.
func sliceCost(n int) int64 { return 24 + roundUp(16*int64(n)) }

// stringCost bounds a string of n bytes in an interface: its boxed header
// and its bytes. A map's key takes its bytes only (keyCost): its header
// is in the map's slot.
func stringCost(n int) int64 {
	if n == 0 {
		return 0
	}
	return 16 + roundUp(int64(n))
}

func keyCost(n int) int64 { return roundUp(int64(n)) }

// footprint bounds the memory v, a decoded or normalized JSON value, holds.
func footprint(v any) int64 {
	switch x := v.(type) {
	case nil, bool:
		return 0
	case float64:
		return numberCost
	case string:
		return stringCost(len(x))
	case []any:
		n := sliceCost(len(x))
		for _, item := range x {
			n += footprint(item)
		}
		return n
	case map[string]any:
		n := mapCost(len(x))
		for k, item := range x {
			n += keyCost(len(k)) + footprint(item)
		}
		return n
	default:
		// What normalize leaves is JSON's; anything else is counted as
		// generously as the old bytes-based estimate.
		return 8 * int64(jsonSize(v))
	}
}

// shape is what scanShape counts in a JSON value before it is decoded.
type shape struct {
	objects, arrays int
	members         int   // objects' entries: their colons
	elems           int   // arrays' items
	strs            int   // string values (not keys)
	numbers         int   // number values
	strBytes        int64 // the bytes inside quotes, of keys and values
	// boxes is what the objects and arrays closed take (mapCost,
	// sliceCost of their items); one never closed, or open past
	// MaxStateDepth, is bounded by its items (open).
	boxes int64
	open  int // items of containers never closed or not followed
	// peakElems and peakMembers are the most items of arrays and entries
	// of objects open at once: what the decoder stacks before it builds
	// each container.
	peakElems, peakMembers int
	curElems, curMembers   int
}

// containers is the objects and arrays counted.
func (sh shape) containers() int { return sh.objects + sh.arrays }

// memory bounds what decoding the value takes at its peak: what it builds
// (footprint of the result) and the decoder's stacks (16 bytes an array's
// item and 32 an object's entry open at once, three times over while a
// stack grows).
func (sh shape) memory() int64 {
	return sh.boxes + 340 + 96*int64(sh.open) +
		32*int64(sh.strs) + 16*int64(sh.members) + sh.strBytes + sh.strBytes/4 +
		numberCost*int64(sh.numbers) +
		48*int64(sh.peakElems) + 96*int64(sh.peakMembers)
}

// scanShape counts data's objects, arrays, entries, items, strings and
// numbers outside strings, in about a seventh of the time decoding it
// takes, so that what decoding reserves follows what data holds rather
// than the most its bytes could hold. For bytes that are not JSON it
// counts something; decoding them fails. Past MaxStateDepth it counts on
// without following which container is open (decoding refuses such
// data). It calls yield (when not nil) each jsonvalue.YieldEvery bytes,
// and stops with the error yield returns.
func scanShape(data []byte, yield func() error) (shape, error) {
	var sh shape
	stack := make([]openBox, 0, 16)
	deeper := 0 // containers open past MaxStateDepth
	var prev byte = '['
	next := jsonvalue.YieldEvery
	for i := 0; i < len(data); i++ {
		if i >= next {
			next = i + jsonvalue.YieldEvery
			if yield != nil {
				if err := yield(); err != nil {
					return sh, err
				}
			}
		}
		c := data[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			sh.countValue(stack, deeper)
			if c == '{' {
				sh.objects++
			} else {
				sh.arrays++
			}
			if len(stack) < MaxStateDepth+1 && deeper == 0 {
				stack = append(stack, openBox{object: c == '{'})
			} else {
				deeper++
				sh.open++ // bounded by its items, not followed
			}
		case '}', ']':
			switch n := len(stack); {
			case deeper > 0:
				deeper--
			case n > 0:
				sh.close(stack[n-1])
				stack = stack[:n-1]
			}
		case ':':
			sh.members++
			if n := len(stack); n > 0 && deeper == 0 {
				stack[n-1].items++
				sh.curMembers++
				sh.peakMembers = max(sh.peakMembers, sh.curMembers)
			} else {
				sh.open++
			}
		case '"':
			// The string ends at the next quote that an odd run of
			// backslashes does not escape.
			start := i + 1
			for {
				j := bytes.IndexByte(data[i+1:], '"')
				if j < 0 {
					sh.strBytes += int64(len(data) - start)
					return sh, nil
				}
				i += 1 + j
				k := i - 1
				for k >= 0 && data[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
			sh.strBytes += int64(i - start)
			if n := len(stack); n == 0 || !stack[n-1].object || prev == ':' {
				sh.strs++
				sh.countValue(stack, deeper)
			}
		default:
			if prev == '[' || prev == ',' || prev == ':' {
				if c == '-' || c >= '0' && c <= '9' {
					sh.numbers++
				}
				sh.countValue(stack, deeper)
			}
		}
		prev = c
	}
	for _, b := range stack { // never closed: bounded by their items
		sh.open += b.items + 1
	}
	return sh, nil
}

// openBox is a container open where scanShape reads: an object or an
// array, and its items so far.
type openBox struct {
	object bool
	items  int
}

// countValue counts a value beginning in the innermost open container: an
// item when that is an array (a member was counted at its colon).
func (sh *shape) countValue(stack []openBox, deeper int) {
	n := len(stack)
	switch {
	case n == 0:
	case deeper > 0:
		sh.open++
	case !stack[n-1].object:
		stack[n-1].items++
		sh.elems++
		sh.curElems++
		sh.peakElems = max(sh.peakElems, sh.curElems)
	}
}

// close counts what a container closed takes, and its items off the
// decoder's stacks.
func (sh *shape) close(b openBox) {
	if b.object {
		sh.boxes += mapCost(b.items)
		sh.curMembers -= b.items
	} else {
		sh.boxes += sliceCost(b.items)
		sh.curElems -= b.items
	}
}

// copyCost bounds what writing at p copies of root (Path.set copies each
// object and array on the way, one item larger at most).
func (p Path) copyCost(root map[string]any) int64 {
	var n int64
	var node any = root
	for _, e := range p.elems {
		if e.isIndex {
			arr, _ := node.([]any)
			n += sliceCost(max(len(arr), e.index+1))
			node = nil
			if e.index < len(arr) {
				node = arr[e.index]
			}
			continue
		}
		m, _ := node.(map[string]any)
		n += mapCost(len(m)+1) + keyCost(len(e.key))
		node = m[e.key]
	}
	return n
}

// mergeCopies bounds the objects applying patch to target makes anew
// (mergePatch copies each object of target the patch reaches, with the
// patch's entries added); what the patch's values hold is the patch's
// footprint, which decoding it counted.
func mergeCopies(target, patch any) int64 {
	p, ok := patch.(map[string]any)
	if !ok {
		return 0
	}
	t, _ := target.(map[string]any)
	n := mapCost(len(t) + len(p))
	for k, v := range p {
		if m, ok := v.(map[string]any); ok {
			n += mergeCopies(t[k], m)
		}
	}
	return n
}
