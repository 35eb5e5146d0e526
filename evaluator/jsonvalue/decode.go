package jsonvalue

import (
	"strconv"
	"sync"
)

// MaxDepth is the deepest nesting of arrays and objects Decode accepts; the
// outermost array or object is level 1. It is encoding/json's own limit, so
// both accept the same documents, and it bounds Decode's recursion.
const MaxDepth = 10000

// A SyntaxError describes JSON text that Decode rejects.
type SyntaxError struct {
	// Offset is the number of bytes read when the error was found, as in
	// encoding/json.SyntaxError: for an offending byte it is that byte's
	// index plus one, and for input that ends too soon it is len(data).
	Offset int64
	// Msg says what is wrong, in encoding/json's words.
	Msg string
}

func (e *SyntaxError) Error() string {
	return e.Msg + " at offset " + strconv.FormatInt(e.Offset, 10)
}

// Decode parses one JSON value (RFC 8259) and returns it as map[string]any,
// []any, string, float64, bool or nil: exactly the value
// encoding/json.Unmarshal produces into an any. See the package
// documentation for the details of the contract.
func Decode(data []byte) (any, error) {
	d := decoders.Get().(*decoder)
	d.maxDepth = MaxDepth
	v, err := d.decode(data)
	d.reset()
	decoders.Put(d)
	return v, err
}

// Limits bound what DecodeLimited builds, so that a document costs at most
// that much memory whatever its bytes: `{}` is 2 bytes of JSON and about 50
// of Go, so 15 MB of them would take half a gigabyte.
type Limits struct {
	// MaxDepth bounds the nesting of arrays and objects (0: MaxDepth; at
	// most MaxDepth).
	MaxDepth int
	// MaxContainers bounds the arrays and objects in all (0: no bound).
	MaxContainers int
	// Yield, when set, is called each time decoding has read another
	// YieldEvery bytes (at the end of an array's element or an object's
	// member): a large document takes tens of milliseconds, and a caller
	// sharing the cores gives them up there (turns.Yield). An error it
	// returns stops decoding and is DecodeLimited's.
	Yield func() error
}

// YieldEvery is how many bytes DecodeLimited reads between two calls of
// Limits.Yield: about 100 µs of decoding.
const YieldEvery = 64 << 10

// LimitError is a document past a Limits bound. Decoding stops where it
// is found: nothing past it is built.
type LimitError struct {
	What   string // "depth" or "containers"
	Limit  int
	Offset int64 // the bytes read when it was found
}

func (e *LimitError) Error() string {
	if e.What == "depth" {
		return "nested deeper than " + strconv.Itoa(e.Limit) + " levels at offset " + strconv.FormatInt(e.Offset, 10)
	}
	return "more than " + strconv.Itoa(e.Limit) + " objects and arrays at offset " + strconv.FormatInt(e.Offset, 10)
}

// DecodeLimited is Decode within lim: a document past a bound is a
// *LimitError, found before the rest of it is decoded. It also returns the
// objects and arrays it built.
func DecodeLimited(data []byte, lim Limits) (any, int, error) {
	d := decoders.Get().(*decoder)
	d.maxDepth, d.maxContainers = MaxDepth, lim.MaxContainers
	d.yield, d.nextYield = lim.Yield, YieldEvery
	if lim.MaxDepth > 0 && lim.MaxDepth < MaxDepth {
		d.maxDepth = lim.MaxDepth
	}
	v, err := d.decode(data)
	n := d.containers
	d.reset()
	decoders.Put(d)
	return v, n, err
}

// decoders recycles decoders, so that small documents like merge patches do
// not pay each time for growing scratch stacks and zeroing caches.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

func (d *decoder) decode(data []byte) (any, error) {
	d.data = data
	v, i := d.value(skipSpace(data, 0))
	if i >= 0 {
		if i = skipSpace(data, i); i < len(data) {
			d.failToken(i, "after top-level value")
		}
	}
	if d.yieldErr != nil {
		return nil, d.yieldErr
	}
	if d.limitErr != nil {
		return nil, d.limitErr
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.rangeErr != nil {
		return nil, d.rangeErr
	}
	return v, nil
}

// maxKeptScratch bounds the scratch stacks a pooled decoder keeps: a huge
// document may grow them far beyond what the next one needs.
const maxKeptScratch = 1 << 12

// reset readies d for another document. It drops every reference to the
// last document's values that the caches do not hold, so that a pooled
// decoder does not keep a decoded tree alive.
func (d *decoder) reset() {
	d.data, d.depth, d.err, d.rangeErr = nil, 0, nil, nil
	d.maxDepth, d.maxContainers, d.containers, d.limitErr = 0, 0, 0, nil
	d.yield, d.nextYield, d.yieldErr = nil, 0, nil
	// The stacks are empty unless decoding stopped at an error.
	clear(d.elems)
	clear(d.members)
	d.elems, d.members, d.buf = d.elems[:0], d.members[:0], d.buf[:0]
	if cap(d.elems) > maxKeptScratch {
		d.elems = nil
	}
	if cap(d.members) > maxKeptScratch {
		d.members = nil
	}
	if cap(d.buf) > maxKeptScratch*16 {
		d.buf = nil
	}
}

// decoder holds the state of a Decode call.
//
// Its methods take the index of the byte to read next and return the index
// after what they consumed. A negative index means a syntax error, recorded
// in err; every caller then returns at once. Passing the index around
// instead of keeping it in the struct lets it live in a register.
type decoder struct {
	data  []byte
	depth int // arrays and objects open around the current position

	// The bounds of DecodeLimited (maxContainers 0: none), the containers
	// begun so far, and the bound that stopped decoding.
	maxDepth, maxContainers, containers int
	limitErr                            *LimitError

	// Limits.Yield, the offset at which it is next called, and the error
	// it stopped decoding with.
	yield     func() error
	nextYield int
	yieldErr  error

	err *SyntaxError // the syntax error that stopped decoding
	// rangeErr is the first number too large for a float64. Decoding goes
	// on past it because encoding/json checks the syntax of the whole text
	// first: a syntax error further on must win.
	rangeErr *SyntaxError

	// elems and members are stacks shared by all the arrays and objects
	// being decoded: each one pushes its items, then copies them into a
	// slice or map of exactly the right size and pops them. That costs one
	// allocation per array and no map growth, where appending to a fresh
	// slice or map per value costs several.
	elems   []any
	members []member

	// keys and strs cache recently decoded object keys and short string
	// values, boxed, so that a repeated one costs no allocation (a string
	// value costs two: its bytes and its box). They are direct-mapped by
	// cacheSlot: a lookup is a hash of a few bytes and a comparison, and a
	// collision only costs the allocations the cache would have saved.
	// They outlive a call, in the pool: strings are immutable, so handing
	// the same one to several documents is invisible, and they are short.
	keys [1 << cacheBits]string
	strs [1 << cacheBits]any

	buf []byte // scratch space for strings that need unescaping
}

type member struct {
	key string
	val any
}

// value decodes the value starting at data[i], which is not whitespace.
func (d *decoder) value(i int) (any, int) {
	data := d.data
	if i >= len(data) {
		return nil, d.failExpect(i, "looking for beginning of value")
	}
	switch data[i] {
	case '"':
		return d.stringValue(i)
	case '{':
		return d.object(i)
	case '[':
		return d.array(i)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return d.number(i)
	case 't':
		return true, d.literal(i, "true")
	case 'f':
		return false, d.literal(i, "false")
	case 'n':
		return nil, d.literal(i, "null")
	}
	return nil, d.failExpect(i, "looking for beginning of value")
}

// object decodes the object whose '{' is at data[i].
func (d *decoder) object(i int) (any, int) {
	if d.depth++; d.depth > d.maxDepth {
		if d.maxDepth < MaxDepth {
			return nil, d.failLimit(i, "depth", d.maxDepth)
		}
		return nil, d.failToken(i, "exceeded max depth")
	}
	if d.containers++; d.maxContainers > 0 && d.containers > d.maxContainers {
		return nil, d.failLimit(i, "containers", d.maxContainers)
	}
	data := d.data
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		d.depth--
		return map[string]any{}, i + 1
	}
	base := len(d.members)
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, d.failExpect(i, "looking for beginning of object key string")
		}
		var key string
		if key, i = d.key(i); i < 0 {
			return nil, i
		}
		if i = skipSpace(data, i); i >= len(data) || data[i] != ':' {
			return nil, d.failExpect(i, "after object key")
		}
		var val any
		if val, i = d.value(skipSpace(data, i+1)); i < 0 {
			return nil, i
		}
		d.members = append(d.members, member{key, val})
		if d.yield != nil && i >= d.nextYield && !d.pause(i) {
			return nil, -1
		}
		if i = skipSpace(data, i); i < len(data) {
			if data[i] == ',' {
				i = skipSpace(data, i+1)
				continue
			}
			if data[i] == '}' {
				i++
				break
			}
		}
		return nil, d.failExpect(i, "after object key:value pair")
	}
	members := d.members[base:]
	m := make(map[string]any, len(members))
	for _, kv := range members {
		m[kv.key] = kv.val // in document order, so the last duplicate wins
	}
	clear(members) // a pooled decoder must not keep values alive
	d.members = d.members[:base]
	d.depth--
	return m, i
}

// key decodes the object key whose '"' is at data[i].
func (d *decoder) key(i int) (string, int) {
	b, j := d.stringBytes(i)
	if j < 0 {
		return "", j
	}
	if len(b) > maxCachedKey {
		return string(b), j
	}
	// Documents repeat a few keys across many objects: take the key from
	// the cache when it is there. string(b) == s does not allocate.
	slot := &d.keys[cacheSlot(b)]
	if *slot != string(b) {
		*slot = string(b)
	}
	return *slot, j
}

// maxCachedKey is the longest key worth caching; it also keeps a pooled
// decoder from holding on to a huge one.
const maxCachedKey = 64

// maxCachedString is the longest string value worth caching: the values
// that repeat, like states, units, currencies and tags, are short.
const maxCachedString = 24

// stringValue decodes the string value whose '"' is at data[i].
func (d *decoder) stringValue(i int) (any, int) {
	b, j := d.stringBytes(i)
	if j < 0 || len(b) > maxCachedString {
		return string(b), j
	}
	slot := &d.strs[cacheSlot(b)]
	if s, ok := (*slot).(string); !ok || s != string(b) {
		*slot = string(b)
	}
	return *slot, j
}

// cacheBits sets the size of the caches: 128 entries each.
const cacheBits = 7

// cacheSlot hashes a string to a cache index from its length and three of
// its bytes, which tells apart most keys and enum-like values of a document
// while costing the same for any length.
func cacheSlot(b []byte) uint {
	n := uint64(len(b))
	if n == 0 {
		return 0
	}
	h := n | uint64(b[0])<<8 | uint64(b[n/2])<<16 | uint64(b[n-1])<<24
	return uint(h * 0x9e3779b97f4a7c15 >> (64 - cacheBits)) // Fibonacci hashing: take the well-mixed top bits
}

// array decodes the array whose '[' is at data[i].
func (d *decoder) array(i int) (any, int) {
	if d.depth++; d.depth > d.maxDepth {
		if d.maxDepth < MaxDepth {
			return nil, d.failLimit(i, "depth", d.maxDepth)
		}
		return nil, d.failToken(i, "exceeded max depth")
	}
	if d.containers++; d.maxContainers > 0 && d.containers > d.maxContainers {
		return nil, d.failLimit(i, "containers", d.maxContainers)
	}
	data := d.data
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		d.depth--
		return []any{}, i + 1
	}
	base := len(d.elems)
	for {
		var val any
		if val, i = d.value(i); i < 0 {
			return nil, i
		}
		d.elems = append(d.elems, val)
		if d.yield != nil && i >= d.nextYield && !d.pause(i) {
			return nil, -1
		}
		if i = skipSpace(data, i); i < len(data) {
			if data[i] == ',' {
				i = skipSpace(data, i+1)
				continue
			}
			if data[i] == ']' {
				i++
				break
			}
		}
		return nil, d.failExpect(i, "after array element")
	}
	elems := d.elems[base:]
	a := make([]any, len(elems))
	copy(a, elems)
	clear(elems)
	d.elems = d.elems[:base]
	d.depth--
	return a, i
}

// pause calls Limits.Yield, at offset i; false: it stopped decoding.
func (d *decoder) pause(i int) bool {
	d.nextYield = i + YieldEvery
	if err := d.yield(); err != nil {
		d.yieldErr = err
		return false
	}
	return true
}

// literal checks for word (true, false or null) at data[i], whose first
// byte the caller has matched, and returns the index after it.
func (d *decoder) literal(i int, word string) int {
	data := d.data
	if len(data)-i >= len(word) && string(data[i:i+len(word)]) == word {
		return i + len(word)
	}
	for k := 1; k < len(word); k++ {
		if i+k >= len(data) || data[i+k] != word[k] {
			return d.failToken(i+k, "in literal "+word+" (expecting "+quoteChar(word[k])+")")
		}
	}
	panic("jsonvalue: literal mismatch not found") // unreachable: the fast check failed
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		if c := data[i]; c > ' ' || c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			break
		}
		i++
	}
	return i
}

// failExpect records a syntax error at data[i], where the decoder expected
// something that may follow whitespace, and returns -1. At end of input
// that is encoding/json's "unexpected end of JSON input".
func (d *decoder) failExpect(i int, context string) int {
	if i >= len(d.data) {
		d.err = &SyntaxError{Offset: int64(len(d.data)), Msg: "unexpected end of JSON input"}
		return -1
	}
	return d.failToken(i, context)
}

// failToken records a syntax error at data[i], inside a token, and returns
// -1. At end of input encoding/json feeds its scanner one space to finish a
// pending number and then complains about that space; so does this.
// failLimit stops decoding at data[i] for a bound of DecodeLimited.
func (d *decoder) failLimit(i int, what string, limit int) int {
	d.limitErr = &LimitError{What: what, Limit: limit, Offset: int64(i + 1)}
	return -1
}

func (d *decoder) failToken(i int, context string) int {
	c, offset := byte(' '), len(d.data)
	if i < len(d.data) {
		c, offset = d.data[i], i+1
	}
	d.err = &SyntaxError{Offset: int64(offset), Msg: "invalid character " + quoteChar(c) + " " + context}
	return -1
}

// quoteChar formats c the way encoding/json's error messages do.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}
