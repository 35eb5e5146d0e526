package vars

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MinConcealedBytes is the shortest bound value Secrets replaces where a
// provider's message repeats it. Replacing a shorter one ("a", "eu", "v2")
// wherever it occurs would take it out of ordinary words and leave no
// message: a message that holds one anywhere is left out whole instead.
const MinConcealedBytes = 4

// Concealed is what a bound value becomes in a provider's message.
const Concealed = "[redacted]"

// maxTokensPerSlot is how many values a slot keeps (Add): an
// OAuth2 token and the one before it, which a provider may still echo.
const maxTokensPerSlot = 2

// Secrets are the values bound to one manual (its variables, as the
// operator binds them, and the OAuth2 tokens fetched with them), which a
// provider's message must not show: a provider that echoes the key it got
// would show it to every caller of the tool. A registry makes one a
// manual, when the manual's name is first bound, with every value its
// sources bind to that name, and adds what is looked up or fetched later.
// Reading it takes no lock.
type Secrets struct {
	mu    sync.Mutex
	fixed []string            // values, as bound
	slots map[string][]string // values that replace one another (tokens), newest last
	table atomic.Pointer[secretTable]
}

// secretTable is one immutable reading of a Secrets.
type secretTable struct {
	has      map[string]bool   // every value, as added
	replacer *strings.Replacer // every form of the long ones, longest first
	forms    []string          // every form of every value, for reveals
}

// Add makes values secrets; slot "" keeps them for good, another slot
// keeps its last two (an OAuth2 token and the one before it, which a
// provider may still echo).
func (s *Secrets) Add(slot string, values ...string) {
	if s == nil {
		return
	}
	if t := s.table.Load(); t != nil { // held already: nothing to change, no lock
		fresh := false
		for _, v := range values {
			if v != "" && !t.has[v] {
				fresh = true
				break
			}
		}
		if !fresh {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range values {
		if v == "" {
			continue
		}
		if slot == "" {
			if !slices.Contains(s.fixed, v) {
				s.fixed = append(s.fixed, v)
				changed = true
			}
			continue
		}
		if s.slots == nil {
			s.slots = map[string][]string{}
		}
		held := s.slots[slot]
		if slices.Contains(held, v) {
			continue
		}
		held = append(held, v)
		if len(held) > maxTokensPerSlot {
			held = held[len(held)-maxTokensPerSlot:]
		}
		s.slots[slot] = held
		changed = true
	}
	if changed || s.table.Load() == nil {
		s.table.Store(s.build())
	}
}

// build makes the table of what s holds; s.mu is held.
func (s *Secrets) build() *secretTable {
	t := &secretTable{has: map[string]bool{}}
	all := slices.Clone(s.fixed)
	for _, held := range s.slots {
		all = append(all, held...)
	}
	seen := map[string]bool{}
	var long []string
	for _, v := range all {
		t.has[v] = true
		for _, f := range forms(v) {
			if seen[f] {
				continue
			}
			seen[f] = true
			t.forms = append(t.forms, f)
			if len(f) >= MinConcealedBytes {
				long = append(long, f)
			}
		}
	}
	// Longest first: of two values one of which holds the other, the
	// longer is replaced whole.
	slices.SortFunc(long, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(long))
	for _, f := range long {
		pairs = append(pairs, f, Concealed)
	}
	t.replacer = strings.NewReplacer(pairs...)
	return t
}

// forms are the ways a value may come back in a provider's text: as it
// is, URL-encoded (a query's or a path's), JSON-escaped, and in base64.
func forms(v string) []string {
	out := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	if raw, err := json.Marshal(v); err == nil {
		out = append(out, string(raw[1:len(raw)-1]))
	}
	return append(out, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
		base64.URLEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
}

// Conceal returns text with every value s holds, of at least
// MinConcealedBytes, in any of its forms, replaced by Concealed.
func (s *Secrets) Conceal(text string) string {
	if s == nil {
		return text
	}
	t := s.table.Load()
	if t == nil || len(t.forms) == 0 {
		return text
	}
	return t.replacer.Replace(text)
}

// Reveals reports whether text holds a value s holds, in any of its forms
// (a short one included).
func (s *Secrets) Reveals(text string) bool {
	if s == nil {
		return false
	}
	t := s.table.Load()
	if t == nil {
		return false
	}
	for _, f := range t.forms {
		if strings.Contains(text, f) {
			return true
		}
	}
	return false
}

// sharedRun is how many bytes in a row a shown token may have in common
// with a bound value: a token that is a piece of a key, or of whose value
// a key is a piece, is a piece of the key shown.
const sharedRun = 8

// Withholds reports whether tok may not be shown because of a value s
// holds: it holds one in any of its forms (Reveals, a short one
// included), or it has min(len(tok), 8) bytes in a row, at least
// MinConcealedBytes, in common with one (a piece of a key, a key's
// neighbour).
func (s *Secrets) Withholds(tok string) bool {
	if s.Reveals(tok) {
		return true
	}
	n := min(len(tok), sharedRun)
	if s == nil || n < MinConcealedBytes {
		return false
	}
	t := s.table.Load()
	if t == nil {
		return false
	}
	for _, f := range t.forms {
		for i := 0; i+n <= len(tok); i++ {
			if strings.Contains(f, tok[i:i+n]) {
				return true
			}
		}
	}
	return false
}
