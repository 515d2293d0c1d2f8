package fold

import (
	"maps"
	"slices"
)

// Layered is a map of string keys made of a shared base that is never written once a
// State or Arrivals holding it has been returned, and a small top layer of what was
// added since (a Load that folds 100 new entries must not copy a map of
// 100,000). Reads look in top, then in base. with returns a new layered and leaves the
// receiver as it was, so a View handed out earlier keeps reading what it read.
//
// The base is a map, or — restored from the fold checkpoint (ADR 0011) — its keys in
// increasing order with their values (keys, vals): found by binary search, so a new
// process does not build a map of 100,000 keys it will look up a few of. A base is one
// or the other, never both.
type Layered[V any] struct {
	Base, top map[string]V `json:"-"`
	keys      []string     // sorted, no repeats; vals[i] is keys[i]'s value
	vals      []V
}

// SortedLayered makes a layered whose base is keys (strictly increasing) with vals.
func SortedLayered[V any](keys []string, vals []V) Layered[V] {
	return Layered[V]{keys: keys, vals: vals}
}

// layeredTopMax is how large the top layer grows before with folds it into a new base
// (one copy of the whole map per that many additions).
const layeredTopMax = 4096

func (m Layered[V]) Get(k string) (V, bool) {
	if v, ok := m.top[k]; ok {
		return v, true
	}
	if m.keys != nil {
		if i, ok := slices.BinarySearch(m.keys, k); ok {
			return m.vals[i], true
		}
		var zero V
		return zero, false
	}
	v, ok := m.Base[k]
	return v, ok
}

// inBase reports whether k is in the base.
func (m Layered[V]) inBase(k string) bool {
	if m.keys != nil {
		_, ok := slices.BinarySearch(m.keys, k)
		return ok
	}
	_, ok := m.Base[k]
	return ok
}

// set writes k in the top layer. Only for a layered still being built (Fold, loading
// the arrival log): never on one a View may hold.
func (m *Layered[V]) set(k string, v V) {
	if m.top == nil {
		m.top = map[string]V{}
	}
	m.top[k] = v
}

// Len returns the number of keys (a key in both layers counts once).
func (m Layered[V]) Len() int {
	n := len(m.Base) + len(m.keys)
	for k := range m.top {
		if !m.inBase(k) {
			n++
		}
	}
	return n
}

// All calls fn for every key once, with its newest value.
func (m Layered[V]) All(fn func(k string, v V)) {
	for k, v := range m.top {
		fn(k, v)
	}
	for k, v := range m.Base {
		if _, ok := m.top[k]; !ok {
			fn(k, v)
		}
	}
	for i, k := range m.keys {
		if _, ok := m.top[k]; !ok {
			fn(k, m.vals[i])
		}
	}
}

// With returns m plus add (add's values win). It copies the top layer, or, once the
// top would exceed layeredTopMax, the whole map into a new base.
func (m Layered[V]) With(add map[string]V) Layered[V] {
	if len(add) == 0 {
		return m
	}
	if len(m.top)+len(add) > layeredTopMax {
		base := make(map[string]V, len(m.Base)+len(m.keys)+len(m.top)+len(add))
		maps.Copy(base, m.Base)
		for i, k := range m.keys {
			base[k] = m.vals[i]
		}
		maps.Copy(base, m.top)
		maps.Copy(base, add)
		return Layered[V]{Base: base}
	}
	top := make(map[string]V, len(m.top)+len(add))
	maps.Copy(top, m.top)
	maps.Copy(top, add)
	return Layered[V]{Base: m.Base, top: top, keys: m.keys, vals: m.vals}
}
