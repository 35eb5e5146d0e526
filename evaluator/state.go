package evaluator

import (
	"fmt"
	"maps"
	"sync"

	"github.com/exprd/exprd/evaluator/jsonvalue"
)

// State is a session's scopes.root: a JSON object that calls read and write.
// Every change makes a new root that shares what it did not change, so a
// snapshot handed out never changes.
type State struct {
	mu   sync.RWMutex
	root map[string]any
}

// NewState returns an empty state ({}).
func NewState() *State { return &State{root: map[string]any{}} }

// Fork returns a new State holding s's current root. The two share it
// until either changes, which copies only what changes.
func (s *State) Fork() *State { return &State{root: s.Snapshot()} }

// Snapshot returns the current root. Callers must not modify it.
func (s *State) Snapshot() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.root
}

// Replace sets the state to a JSON object. On error the state is unchanged.
func (s *State) Replace(data []byte) error {
	v, err := jsonvalue.Decode(data)
	if err != nil {
		return fmt.Errorf("state is not valid JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("state must be a JSON object, got %s", jsonKind(v))
	}
	s.mu.Lock()
	s.root = m
	s.mu.Unlock()
	return nil
}

// MergePatch applies an RFC 7386 JSON merge patch, which must be an object.
// On error the state is unchanged.
func (s *State) MergePatch(data []byte) error {
	v, err := jsonvalue.Decode(data)
	if err != nil {
		return fmt.Errorf("patch is not valid JSON: %w", err)
	}
	patch, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("a patch of the state must be a JSON object, got %s", jsonKind(v))
	}
	s.mu.Lock()
	s.root = mergePatch(s.root, patch).(map[string]any)
	s.mu.Unlock()
	return nil
}

// mergePatch is RFC 7386's MergePatch, copying only what the patch changes.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, _ := target.(map[string]any)
	out := maps.Clone(t)
	if out == nil {
		out = make(map[string]any, len(p))
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(t[k], v)
	}
	return out
}

// set writes v at p.
func (s *State) set(p Path, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	root, err := p.set(s.root, v)
	if err != nil {
		return err
	}
	s.root = root
	return nil
}
