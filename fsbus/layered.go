package fsbus

import "maps"

// layered is a map of string keys made of a shared base that is never written once a
// State or Arrivals holding it has been returned, and a small top layer of what was
// added since (issue 7: a Load that folds 100 new entries must not copy a map of
// 100,000). Reads look in top, then in base. with returns a new layered and leaves the
// receiver as it was, so a View handed out earlier keeps reading what it read.
type layered[V any] struct {
	base, top map[string]V
}

// layeredTopMax is how large the top layer grows before with folds it into a new base
// (one copy of the whole map per that many additions).
const layeredTopMax = 4096

func (m layered[V]) get(k string) (V, bool) {
	if v, ok := m.top[k]; ok {
		return v, true
	}
	v, ok := m.base[k]
	return v, ok
}

// set writes k in the top layer. Only for a layered still being built (Fold, loading
// the arrival log): never on one a View may hold.
func (m *layered[V]) set(k string, v V) {
	if m.top == nil {
		m.top = map[string]V{}
	}
	m.top[k] = v
}

// len returns the number of keys (a key in both layers counts once).
func (m layered[V]) len() int {
	n := len(m.base)
	for k := range m.top {
		if _, ok := m.base[k]; !ok {
			n++
		}
	}
	return n
}

// all calls fn for every key once, with its newest value.
func (m layered[V]) all(fn func(k string, v V)) {
	for k, v := range m.top {
		fn(k, v)
	}
	for k, v := range m.base {
		if _, ok := m.top[k]; !ok {
			fn(k, v)
		}
	}
}

// with returns m plus add (add's values win). It copies the top layer, or, once the
// top would exceed layeredTopMax, the whole map into a new base.
func (m layered[V]) with(add map[string]V) layered[V] {
	if len(add) == 0 {
		return m
	}
	if len(m.top)+len(add) > layeredTopMax {
		base := make(map[string]V, len(m.base)+len(m.top)+len(add))
		maps.Copy(base, m.base)
		maps.Copy(base, m.top)
		maps.Copy(base, add)
		return layered[V]{base: base}
	}
	top := make(map[string]V, len(m.top)+len(add))
	maps.Copy(top, m.top)
	maps.Copy(top, add)
	return layered[V]{base: m.base, top: top}
}
