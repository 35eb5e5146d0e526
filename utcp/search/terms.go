package search

import (
	"hash/maphash"
	"strings"
)

// termNode is a node of a persistent treap: terms in key order, each
// node's priority (a seeded hash of its term) no lower than its
// children's. The shape depends only on the set of terms, so the tree
// stays balanced in any order of changes, and a hostile manual cannot
// choose terms that unbalance it. A change copies the path to its term
// and shares the rest of the tree; a nil *termNode is the empty tree.
type termNode struct {
	term        string
	prio        uint64
	n           int // document frequency
	left, right *termNode
}

var termSeed = maphash.MakeSeed()

func termPriority(term string) uint64 { return maphash.String(termSeed, term) }

// df is term's document frequency, 0 when no tool has it.
func (t *termNode) df(term string) int {
	for t != nil {
		switch c := strings.Compare(term, t.term); {
		case c < 0:
			t = t.left
		case c > 0:
			t = t.right
		default:
			return t.n
		}
	}
	return 0
}

// withDF returns the tree with term's document frequency set to n (the
// term dropped when n is 0), prio being termPriority(term). t is unchanged.
func (t *termNode) withDF(term string, prio uint64, n int) *termNode {
	if t == nil {
		if n == 0 {
			return nil
		}
		return &termNode{term: term, prio: prio, n: n}
	}
	c := strings.Compare(term, t.term)
	switch {
	case c == 0 && n == 0:
		return joinTerms(t.left, t.right)
	case c == 0:
		cp := *t
		cp.n = n
		return &cp
	case n != 0 && prio > t.prio:
		// Every priority below t is at most t's, so term is not there:
		// it goes here.
		l, r := splitTerms(t, term)
		return &termNode{term: term, prio: prio, n: n, left: l, right: r}
	}
	cp := *t
	if c < 0 {
		cp.left = t.left.withDF(term, prio, n)
	} else {
		cp.right = t.right.withDF(term, prio, n)
	}
	return &cp
}

// splitTerms splits t, which does not hold term, into the terms before
// term and those after, copying the nodes on the way.
func splitTerms(t *termNode, term string) (before, after *termNode) {
	if t == nil {
		return nil, nil
	}
	cp := *t
	if term < t.term {
		before, cp.left = splitTerms(t.left, term)
		return before, &cp
	}
	cp.right, after = splitTerms(t.right, term)
	return &cp, after
}

// joinTerms joins two trees, every term of a before every term of b.
func joinTerms(a, b *termNode) *termNode {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.prio >= b.prio {
		cp := *a
		cp.right = joinTerms(a.right, b)
		return &cp
	}
	cp := *b
	cp.left = joinTerms(a, b.left)
	return &cp
}

// buildTerms builds the tree of the sorted terms in one pass (a Cartesian
// tree built on a stack of its right spine).
func buildTerms(sorted []string, df map[string]int) *termNode {
	var spine []*termNode
	for _, term := range sorted {
		nd := &termNode{term: term, prio: termPriority(term), n: df[term]}
		var last *termNode
		for len(spine) > 0 && spine[len(spine)-1].prio < nd.prio {
			last = spine[len(spine)-1]
			spine = spine[:len(spine)-1]
		}
		nd.left = last
		if len(spine) > 0 {
			spine[len(spine)-1].right = nd
		}
		spine = append(spine, nd)
	}
	if len(spine) == 0 {
		return nil
	}
	return spine[0]
}

// ascend calls fn with each term from from on, in order, until fn returns
// false; it reports whether fn never did.
func (t *termNode) ascend(from string, fn func(term string) bool) bool {
	if t == nil {
		return true
	}
	if from <= t.term {
		if !t.left.ascend(from, fn) || !fn(t.term) {
			return false
		}
	}
	return t.right.ascend(from, fn)
}
