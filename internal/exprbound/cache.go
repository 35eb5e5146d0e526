package exprbound

import (
	"fmt"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache is a bounded LRU of compiled programs, keyed by what changes how
// a source compiles. Programs are immutable and safe to share between runs.
// It is safe for concurrent use: golang-lru's LRU under a plain mutex, as a
// lookup is a write (it moves the entry to the front), which the
// read-write lock of lru.Cache only makes dearer.
type Cache[K comparable, V any] struct {
	mu           sync.Mutex
	lru          *simplelru.LRU[K, V]
	hits, misses uint64
}

// CacheStats counts a cache's lookups.
type CacheStats struct {
	Hits, Misses uint64
	Len          int
}

// NewCache returns a cache holding at most size programs; size must be
// positive.
func NewCache[K comparable, V any](size int) (*Cache[K, V], error) {
	c, err := simplelru.NewLRU[K, V](size, nil)
	if err != nil {
		return nil, fmt.Errorf("compile cache size %d: want at least 1", size)
	}
	return &Cache[K, V]{lru: c}, nil
}

// Get returns the program for k, counting the lookup.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	v, ok := c.lru.Get(k)
	if ok {
		c.hits++
	} else {
		c.misses++
	}
	c.mu.Unlock()
	return v, ok
}

// Add keeps v for k, evicting the least recently used program when full.
// A program already kept for k stays: two runs that compiled the same
// source at once hold equal programs.
func (c *Cache[K, V]) Add(k K, v V) {
	c.mu.Lock()
	if !c.lru.Contains(k) {
		c.lru.Add(k, v)
	}
	c.mu.Unlock()
}

// Stats returns the cache's counters.
func (c *Cache[K, V]) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits, Misses: c.misses, Len: c.lru.Len()}
}
