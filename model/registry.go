package model

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
)

// Registry holds providers by name; a request picks one with [Registry.Get].
// It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
	def       string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{providers: map[string]Provider{}} }

// Register adds p under name. An empty name, a nil provider or a name
// already taken is an error. The first provider registered is the default
// until [Registry.SetDefault] says otherwise.
func (r *Registry) Register(name string, p Provider) error {
	if name == "" {
		return errors.New("model: register: empty provider name")
	}
	if p == nil {
		return fmt.Errorf("model: register %q: nil provider", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.providers[name]; ok {
		return fmt.Errorf("model: register %q: name already taken", name)
	}
	r.providers[name] = p
	if r.def == "" {
		r.def = name
	}
	return nil
}

// SetDefault makes the named provider the one Get("") returns.
func (r *Registry) SetDefault(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.providers[name]; !ok {
		return &UnknownProviderError{Name: name, Known: r.namesLocked()}
	}
	r.def = name
	return nil
}

// Default returns the default provider's name, "" when the registry is empty.
func (r *Registry) Default() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.def
}

// Get returns the named provider; "" means the default one. An unknown name
// is an [*UnknownProviderError] that lists the names there are.
func (r *Registry) Get(name string) (Provider, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if name == "" {
		name = r.def
	}
	if p, ok := r.providers[name]; ok {
		return p, nil
	}
	return nil, &UnknownProviderError{Name: name, Known: r.namesLocked()}
}

// Names returns the providers' names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.namesLocked()
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Close closes every provider that is an [io.Closer] (releasing idle
// connections) and returns their errors joined.
func (r *Registry) Close() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var errs []error
	for _, n := range r.namesLocked() {
		if c, ok := r.providers[n].(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %q: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}
