package selfupdate

import (
	"runtime/debug"
	"testing"
)

// TestStamp: the version a build's information carries — an -X main.version the build
// recorded, else the main module version, but under -trimpath (which records no
// -ldflags, so an -X may be hidden) only a tagged one.
func TestStamp(t *testing.T) {
	t.Parallel()
	set := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"-X recorded", "(devel)", set("-ldflags", "-X main.version=1.2.0"), "1.2.0"},
		{"-X quoted with other flags", "v0.0.0-20261202054703-73c5ab862b63", set("-ldflags", `-s -w -X 'main.version=1.3.0-rc.1'`), "1.3.0-rc.1"},
		{"-X= form", "(devel)", set("-ldflags", "-X=main.version=2.0.0"), "2.0.0"},
		{"tagged release under -trimpath", "v1.2.0", set("-trimpath", "true"), "1.2.0"},
		{"tagged, no -trimpath, other -ldflags", "v1.2.0", set("-ldflags", "-s -w"), "1.2.0"},
		{"untagged under -trimpath", "v0.0.0-20261202054703-73c5ab862b63", set("-trimpath", "true"), ""},
		{"after a tag under -trimpath", "v1.2.1-0.20261202054703-73c5ab862b63", set("-trimpath", "true"), ""},
		{"after a pre-release under -trimpath", "v1.2.0-rc.1.0.20261202054703-73c5ab862b63", set("-trimpath", "true"), ""},
		{"dirty under -trimpath", "v1.2.0+dirty", set("-trimpath", "true"), ""},
		{"untagged without -trimpath", "v0.0.0-20261202054703-73c5ab862b63", nil, "0.0.0-20261202054703-73c5ab862b63"},
		{"devel", "(devel)", set("-trimpath", "true"), ""},
		{"none", "", nil, ""},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: c.main}, Settings: c.settings}
		if got := stamp(bi); got != c.want {
			t.Errorf("%s: stamp = %q, want %q", c.name, got, c.want)
		}
	}
}
