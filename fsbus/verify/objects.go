package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// objectTorn reports whether raw (an object file without BOM and surrounding space)
// has only partly arrived: empty, holding a NUL byte, or a JSON text cut short. A
// complete but wrong file (a syntax error before the end, trailing garbage) is not torn.
func objectTorn(raw []byte) bool {
	if len(raw) == 0 || bytes.IndexByte(raw, 0) >= 0 {
		return true
	}
	if json.Valid(raw) {
		return false
	}
	var v any
	err := json.NewDecoder(bytes.NewReader(raw)).Decode(&v)
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// ParseObject is readObject on the bytes of the file at path (named in errors only).
func ParseObject(path string, raw []byte) (canonical []byte, hash string, err error) {
	raw = bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")))
	if objectTorn(raw) {
		return nil, "", fmt.Errorf("reading %s: %w", path, fold.ErrObjectTorn)
	}
	c, err := ledger.CanonicalJSON(raw)
	if err != nil {
		return nil, "", fmt.Errorf("parsing %s: %w", path, err)
	}
	return c, ledger.HashBytes(c), nil
}

// ReadObject reads an object file and returns its canonical form and hash. A BOM,
// CRLF or re-indentation changes neither (docs/design.md §2 rule 9). It returns
// ErrObjectMissing when the file does not exist, ErrObjectTorn (wrapped, naming the
// file) when it has not fully arrived, and an error for other unparseable JSON.
func ReadObject(path string) (canonical []byte, hash string, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fold.ErrObjectMissing
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", path, err)
	}
	return ParseObject(path, raw)
}

// ObjectPath returns the file of object id in the channel rooted at root. Hand-ins live
// under handins/<writer>/.
func ObjectPath(root, writer, id string) string {
	if len(id) > 2 && id[:2] == fold.PrefixHandin {
		return filepath.Join(root, "handins", writer, id+".json")
	}
	return filepath.Join(root, objectDirs[id[:2]], id+".json")
}

// Object kinds and their directories (docs/design.md §2 layout).
var objectDirs = map[string]string{
	fold.PrefixOrder:   "orders",
	fold.PrefixMessage: "messages",
	fold.PrefixAsk:     "asks",
	fold.PrefixResult:  "results",
}

// namesObject lists the entry types whose data.object is the hash of a JSON object
// under orders/, messages/, asks/, results/ or handins/ (docs/format.md §11). Other
// types may carry data.object too (secret.put names a vault file by its bytes), and
// their ref is not an object id: a secret named a--b is not the ask a--b.
var namesObject = map[string]bool{
	fold.TypeOrderCreate: true, fold.TypeMsgPost: true, fold.TypeAskRaise: true, fold.TypeOrderSubmit: true, fold.TypeHandinAdd: true,
}

// IsLink reports whether p itself is a symbolic link (Lstat: never followed). Verify
// and doctor read no object file that is one: the link is listed (KindLink)
// and its target — a key file, say — is never opened, so none of it is printed.
func IsLink(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// channelLinks lists every symbolic link under root (slash paths), without following
// any.
func channelLinks(root string) []string {
	out := []string{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory is reported elsewhere
		}
		if p != root && d.Type()&fs.ModeSymlink != 0 {
			out = append(out, Rel(root, p))
		}
		return nil
	})
	return out
}

// KindLink is the Report kind of a symbolic link inside the channel.
const KindLink = "link"

// objectFiles lists the object files of one directory (dot-names, temp files and
// anything but *.json are skipped).
func objectFiles(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, de := range ents {
		name := de.Name()
		if de.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	slices.Sort(out)
	return out
}

// ObjectEntries maps each object file path an entry of snap names (data.object) to
// that entry (the first, in fold order).
func ObjectEntries(root string, snap *ledger.Snapshot) map[string]*ledger.Entry {
	named := map[string]*ledger.Entry{}
	for i := range snap.Entries {
		e := &snap.Entries[i]
		d, ok := fold.DecodeData(e)
		if !ok || d.Object == "" || !namesObject[e.Type] {
			continue
		}
		id := e.Ref
		if d.Result != "" {
			id = d.Result
		}
		if len(id) < 3 || (objectDirs[id[:2]] == "" && id[:2] != fold.PrefixHandin) {
			continue
		}
		if p := ObjectPath(root, e.Writer, id); named[p] == nil {
			named[p] = e
		}
	}
	return named
}

// AllObjectFiles lists every object file of the channel: orders, results, asks,
// messages and handins/<writer>/.
func AllObjectFiles(root string) []string {
	var files []string
	for _, dir := range []string{"orders", "results", "asks", "messages"} {
		files = append(files, objectFiles(filepath.Join(root, dir))...)
	}
	writers, _ := os.ReadDir(filepath.Join(root, "handins"))
	for _, w := range writers {
		if w.IsDir() {
			files = append(files, objectFiles(filepath.Join(root, "handins", w.Name()))...)
		}
	}
	return files
}

func Rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}
