package selfupdate

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
)

// TestStamp: the version a binary reports as its build information tells it — an -X
// main.version the build recorded, else the main module version, else "dev" — but
// under -trimpath (which records no -ldflags, so an -X may be hidden) only a tagged,
// clean one.
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
		hidden   bool
	}{
		{"-X recorded", "(devel)", set("-ldflags", "-X main.version=1.2.0"), "1.2.0", false},
		{"-X quoted with other flags", "v0.0.0-20261202054703-73c5ab862b63", set("-ldflags", `-s -w -X 'main.version=1.3.0-rc.1'`), "1.3.0-rc.1", false},
		{"-X= form", "(devel)", set("-ldflags", "-X=main.version=2.0.0"), "2.0.0", false},
		{"tagged release under -trimpath", "v1.2.0", set("-trimpath", "true"), "1.2.0", true},
		{"tagged, no -trimpath, other -ldflags", "v1.2.0", set("-ldflags", "-s -w"), "1.2.0", false},
		{"tagged, -trimpath with -ldflags recorded", "v1.2.0", set("-trimpath", "true", "-ldflags", "-s -w"), "1.2.0", false},
		{"untagged under -trimpath", "v0.0.0-20261202054703-73c5ab862b63", set("-trimpath", "true"), "", true},
		{"after a tag under -trimpath", "v1.2.1-0.20261202054703-73c5ab862b63", set("-trimpath", "true"), "", true},
		{"after a pre-release under -trimpath", "v1.2.0-rc.1.0.20261202054703-73c5ab862b63", set("-trimpath", "true"), "", true},
		{"dirty under -trimpath", "v1.2.0+dirty", set("-trimpath", "true"), "", true},
		{"devel under -trimpath", "(devel)", set("-trimpath", "true"), "", true},
		{"untagged without -trimpath", "v0.0.0-20261202054703-73c5ab862b63", nil, "0.0.0-20261202054703-73c5ab862b63", false},
		{"dirty without -trimpath", "v1.2.0+dirty", nil, "", true},
		{"devel without -trimpath", "(devel)", nil, "dev", false},
		{"none", "", nil, "dev", false},
		// -ldflags read as the go command and the linker read them.
		{"the last -X wins", "v1.2.0", set("-ldflags", "-X main.version=1.0.0 -X main.version=6.6.6"), "6.6.6", false},
		{"two spaces", "v1.2.0", set("-ldflags", "-X  main.version=6.6.6"), "6.6.6", false},
		{"a tab", "v1.2.0", set("-ldflags", "-X\tmain.version=6.6.6"), "6.6.6", false},
		{"double-quoted", "v1.2.0", set("-ldflags", `-s "-X" "main.version=6.6.6"`), "6.6.6", false},
		// The go command's quoting: a quote counts only at the start of a word, and
		// ends the word.
		{"quotes inside a word are characters", "v1.2.0", set("-ldflags", `-X main.version="1.2.3"`), `"1.2.3"`, false},
		{"a quoted word ends at its quote", "v1.2.0", set("-ldflags", "-X main.version=1.0.0 -s '-X'main.version=6.6.6"), "6.6.6", false},
		{"a quoted -X alone", "v1.2.0", set("-ldflags", "-s '-X'main.version=9.9.9"), "9.9.9", false},
		{"a quote inside the value", "v1.2.0", set("-ldflags", "-X=main.version=a'b'"), "a'b'", false},
		{"words after a quoted one", "v1.2.0", set("-ldflags", "-s -X 'main.version=1.0.0'-X=main.version=6.6.6"), "6.6.6", false},
		{"--X", "v1.2.0", set("-ldflags", "--X=main.version=6.6.6"), "6.6.6", false},
		{"another package's variable", "v1.2.0", set("-ldflags", "-X other.version=6.6.6"), "1.2.0", false},
		{"inside -extldflags", "v1.2.0", set("-ldflags", "-extldflags '-X main.version=6.6.6'"), "1.2.0", false},
		{"inside -extldflags=", "v1.2.0", set("-ldflags", "-extldflags=-X=main.version=6.6.6"), "1.2.0", false},
		{"a package pattern", "v1.2.0", set("-ldflags", "example.com/other=-X main.version=6.6.6"), "", true},
		{"an unclosed quote", "v1.2.0", set("-ldflags", "-X 'main.version=6.6.6"), "", true},
		{"-X main.version=dev", "v1.2.0", set("-ldflags", "-X main.version=dev"), "1.2.0", false},
		{"-X main.version=dev, no module version", "(devel)", set("-ldflags", "-X main.version=dev"), "dev", false},
		{"-X main.version=", "v1.2.0", set("-ldflags", "-X main.version="), "", false},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: c.main}, Settings: c.settings}
		if got, hidden := stamp(bi); got != c.want || hidden != c.hidden {
			t.Errorf("%s: stamp = %q, %v; want %q, %v", c.name, got, hidden, c.want, c.hidden)
		}
	}
}

// TestCheckInfo: a Go binary is refused for another platform, for a version other than
// the one it reports, under -trimpath from an untagged commit and from any changed tree
// (its version cannot be read); each refusal says why and what to do.
func TestCheckInfo(t *testing.T) {
	t.Parallel()
	same := func(a, b string) bool { return strings.TrimPrefix(a, "v") == strings.TrimPrefix(b, "v") }
	bi := func(main string, kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{Main: debug.Module{Version: main}}
		b.Settings = append(b.Settings, debug.BuildSetting{Key: "GOOS", Value: "linux"}, debug.BuildSetting{Key: "GOARCH", Value: "amd64"})
		for i := 0; i < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	for _, c := range []struct {
		name     string
		bi       *debug.BuildInfo
		platform string
		version  string
		want     string // "" for no error
	}{
		{"tagged release", bi("v1.2.0", "-trimpath", "true"), "linux/amd64", "1.2.0", ""},
		{"tagged, approved with its v", bi("v1.2.0", "-trimpath", "true"), "linux/amd64", "v1.2.0", ""},
		{"another platform", bi("v1.2.0", "-trimpath", "true"), "darwin/arm64", "1.2.0", "is a Go binary for linux/amd64, not darwin/arm64"},
		{"another tag", bi("v1.2.0", "-trimpath", "true"), "linux/amd64", "1.3.0", "reports version 1.2.0 (its git tag; an -X main.version is not visible under -trimpath), not 1.3.0"},
		{"untagged under -trimpath", bi("v1.2.1-0.20261202054703-73c5ab862b63", "-trimpath", "true"), "linux/amd64", "1.3.0", "cannot be read from the file"},
		{"dirty under -trimpath", bi("v1.2.0+dirty", "-trimpath", "true"), "linux/amd64", "1.2.0", "(module version v1.2.0+dirty)"},
		{"-X recorded", bi("(devel)", "-ldflags", "-X main.version=1.4.0"), "linux/amd64", "1.4.0", ""},
		{"-X another version", bi("(devel)", "-ldflags", "-X main.version=1.4.0"), "linux/amd64", "1.5.0", "reports version 1.4.0, not 1.5.0"},
		{"dirty without -trimpath", bi("v1.4.0+dirty", "-ldflags", "-s -w"), "linux/amd64", "1.4.0", "built from a tree with uncommitted changes"},
		{"no stamp at all", bi("(devel)"), "linux/amd64", "1.4.0", "reports version dev, not 1.4.0"},
		{"an empty -X", bi("(devel)", "-ldflags", "-X main.version="), "linux/amd64", "1.4.0", "reports an empty version"},
		{"a package pattern", bi("v1.4.0", "-ldflags", "./ferry=-X main.version=1.4.0"), "linux/amd64", "1.4.0", "cannot be read from the file"},
	} {
		err := checkInfo(c.bi, "releases/f", c.platform, c.version, same)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want invalid with %q", c.name, err, c.want)
		}
	}
}
