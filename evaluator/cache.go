package evaluator

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/expr-lang/expr/vm"
)

// Cache is a bounded LRU of compiled programs. Programs are immutable and
// safe to share between runs.
type Cache struct {
	mu      sync.Mutex
	size    int
	ll      *list.List
	entries map[cacheKey]*list.Element
	hits    atomic.Uint64
	misses  atomic.Uint64
}

// cacheKey is the source and what, besides it, changes how it compiles (the
// tool's key): two strings rather than one joined, to spare an allocation
// on every lookup.
type cacheKey struct {
	tool, src string
}

type cacheEntry struct {
	key     cacheKey
	program *vm.Program
}

// CacheStats counts lookups.
type CacheStats struct {
	Hits, Misses uint64
	Len          int
}

// NewCache returns a cache holding at most size programs.
func NewCache(size int) *Cache {
	return &Cache{size: size, ll: list.New(), entries: map[cacheKey]*list.Element{}}
}

func (c *Cache) get(key cacheKey) (*vm.Program, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if ok {
		c.ll.MoveToFront(e)
	}
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return e.Value.(*cacheEntry).program, true
}

func (c *Cache) put(key cacheKey, p *vm.Program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.entries[key] = c.ll.PushFront(&cacheEntry{key: key, program: p})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	n := c.ll.Len()
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Len: n}
}
