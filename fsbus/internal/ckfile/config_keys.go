package ckfile

import (
	"bytes"
	"reflect"
	"slices"

	"github.com/BurntSushi/toml"
)

// DecodeConfigMap decodes channel.toml's bytes into its keys (a BOM stripped), sig
// left out.
func DecodeConfigMap(raw []byte) (map[string]any, error) {
	var all map[string]any
	if _, err := toml.Decode(string(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))), &all); err != nil {
		return nil, err
	}
	delete(all, "sig")
	return all, nil
}

// ChangedKeys lists the keys whose values differ between two decoded channel.toml
// files: top-level keys, and a table's keys dotted ("policy.max_skew_s").
func ChangedKeys(old, cur map[string]any) []string {
	var out []string
	names := map[string]bool{}
	for k := range old {
		names[k] = true
	}
	for k := range cur {
		names[k] = true
	}
	for k := range names {
		a, b := old[k], cur[k]
		ta, aTable := a.(map[string]any)
		tb, bTable := b.(map[string]any)
		if aTable && bTable {
			for _, sub := range ChangedKeys(ta, tb) {
				out = append(out, k+"."+sub)
			}
			continue
		}
		if !reflect.DeepEqual(a, b) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
