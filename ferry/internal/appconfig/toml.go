package appconfig

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/internal/errs"
)

// Codex's config.toml is edited as text: ferry changes the text of the
// [mcp_servers.ferry] table and its subtables ([mcp_servers.ferry.env], …) only, so
// every other byte of the file (comments, order, spacing) stays as it was. Inside
// ferry's tables a value ferry sets is replaced in place (the key's spelling and a
// comment after it are kept), a missing key is added after the table's last key, a key
// ferry no longer sets is taken out with its line. An entry written another way —
// dotted keys (`mcp_servers.ferry.command = …`) or an inline table (`ferry = {…}`,
// `mcp_servers = {…}`) — is refused with the snippet to paste by hand. The edited text
// is then parsed with BurntSushi/toml next to the old one, and the edit fails, writing
// nothing, unless every other key decodes as before and ferry's entry decodes to what
// was intended.

// tomlText is a config.toml that parses: its bytes and what they decode to.
type tomlText struct {
	text []byte
	doc  map[string]any
}

// decodeTOML parses a config.toml for editConfig; its edit works on the text.
func decodeTOML(data []byte) (any, error) {
	doc, err := decodeTOMLMap(data)
	if err != nil {
		return nil, err
	}
	return &tomlText{text: data, doc: doc}, nil
}

func decodeTOMLMap(data []byte) (map[string]any, error) {
	m := map[string]any{}
	if _, err := toml.Decode(string(data), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// encodeTOML returns the edited text as it is.
func encodeTOML(doc any) ([]byte, error) { return doc.(*tomlText).text, nil }

// tomlItem is a table header or a key/value statement of a TOML text, by byte offsets.
type tomlItem struct {
	header bool     // [table] or [[array of tables]]
	array  bool     // [[…]]
	path   []string // the header's table, or the statement's key (relative to its table)
	table  []string // a statement's table (the header above it; nil at the top)
	start  int      // start of the item's first line
	vStart int      // a statement's value
	vEnd   int
	end    int // after the item's line ending (its trailing comment included)
}

// full is a statement's key from the top of the document.
func (it tomlItem) full() []string {
	return append(slices.Clip(it.table), it.path...)
}

func hasPrefix(p, prefix []string) bool {
	return len(p) >= len(prefix) && slices.Equal(p[:len(prefix)], prefix)
}

// tomlScanner finds the headers and statements of a TOML text that parses (it is run
// after BurntSushi/toml accepted the text, so it only has to find where things are;
// anything it does not expect is an error and nothing is edited).
type tomlScanner struct {
	s   []byte
	i   int
	tbl []string
}

func scanTOML(s []byte) ([]tomlItem, error) {
	sc := &tomlScanner{s: s}
	if bytes.HasPrefix(s, utf8BOM) {
		sc.i = len(utf8BOM)
	}
	var items []tomlItem
	for {
		lineStart := sc.i
		sc.skipSpace()
		if sc.i >= len(s) {
			return items, nil
		}
		switch s[sc.i] {
		case '\n', '\r':
			sc.newline()
			continue
		case '#':
			sc.toEOL()
			sc.newline()
			continue
		case '[':
			it := tomlItem{header: true, start: lineStart}
			sc.i++
			if sc.peek() == '[' {
				it.array = true
				sc.i++
			}
			p, err := sc.key()
			if err != nil {
				return nil, err
			}
			if !sc.eat(']') || (it.array && !sc.eat(']')) {
				return nil, sc.errf("a table header does not end with ]")
			}
			it.path, sc.tbl = p, p
			if err := sc.lineEnd(); err != nil {
				return nil, err
			}
			it.end = sc.i
			items = append(items, it)
		default:
			it := tomlItem{start: lineStart, table: sc.tbl}
			p, err := sc.key()
			if err != nil {
				return nil, err
			}
			if !sc.eat('=') {
				return nil, sc.errf("a key is not followed by =")
			}
			sc.skipSpace()
			it.path, it.vStart = p, sc.i
			if err := sc.value(); err != nil {
				return nil, err
			}
			it.vEnd = sc.i
			if err := sc.lineEnd(); err != nil {
				return nil, err
			}
			it.end = sc.i
			items = append(items, it)
		}
	}
}

func (sc *tomlScanner) errf(format string, args ...any) error {
	line := 1 + bytes.Count(sc.s[:min(sc.i, len(sc.s))], []byte("\n"))
	return fmt.Errorf("line %d: "+format, append([]any{line}, args...)...)
}

func (sc *tomlScanner) peek() byte {
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

func (sc *tomlScanner) skipSpace() {
	for sc.i < len(sc.s) && (sc.s[sc.i] == ' ' || sc.s[sc.i] == '\t') {
		sc.i++
	}
}

func (sc *tomlScanner) eat(c byte) bool {
	sc.skipSpace()
	if sc.peek() == c {
		sc.i++
		return true
	}
	return false
}

func (sc *tomlScanner) toEOL() {
	for sc.i < len(sc.s) && sc.s[sc.i] != '\n' && sc.s[sc.i] != '\r' {
		sc.i++
	}
}

func (sc *tomlScanner) newline() {
	if sc.peek() == '\r' {
		sc.i++
	}
	if sc.peek() == '\n' {
		sc.i++
	}
}

// lineEnd reads what may follow an item on its line: spaces, a comment, the newline.
func (sc *tomlScanner) lineEnd() error {
	sc.skipSpace()
	if sc.peek() == '#' {
		sc.toEOL()
	}
	if c := sc.peek(); c != 0 && c != '\n' && c != '\r' {
		return sc.errf("unexpected %q after an item", c)
	}
	sc.newline()
	return nil
}

// key reads a dotted key: bare, "basic" or 'literal' parts.
func (sc *tomlScanner) key() ([]string, error) {
	var parts []string
	for {
		sc.skipSpace()
		switch sc.peek() {
		case '"', '\'':
			start := sc.i
			if err := sc.str(); err != nil {
				return nil, err
			}
			var v struct{ K string }
			if _, err := toml.Decode("K = "+string(sc.s[start:sc.i]), &v); err != nil {
				return nil, sc.errf("a quoted key: %v", err)
			}
			parts = append(parts, v.K)
		default:
			start := sc.i
			for sc.i < len(sc.s) && isBareKey(sc.s[sc.i]) {
				sc.i++
			}
			if sc.i == start {
				return nil, sc.errf("a key is expected")
			}
			parts = append(parts, string(sc.s[start:sc.i]))
		}
		sc.skipSpace()
		if sc.peek() != '.' {
			return parts, nil
		}
		sc.i++
	}
}

func isBareKey(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// str reads one string of any of TOML's four kinds.
func (sc *tomlScanner) str() error {
	q := sc.s[sc.i]
	if bytes.HasPrefix(sc.s[sc.i:], []byte{q, q, q}) {
		sc.i += 3
		for sc.i < len(sc.s) {
			switch c := sc.s[sc.i]; {
			case c == '\\' && q == '"':
				sc.i += 2
			case c == q:
				n := 0
				for sc.i < len(sc.s) && sc.s[sc.i] == q {
					sc.i++
					n++
				}
				if n >= 3 { // up to two quotes may end the content (TOML §String)
					return nil
				}
			default:
				sc.i++
			}
		}
		return sc.errf("an unterminated multi-line string")
	}
	sc.i++
	for sc.i < len(sc.s) {
		switch c := sc.s[sc.i]; {
		case c == '\\' && q == '"':
			sc.i += 2
		case c == q:
			sc.i++
			return nil
		case c == '\n':
			return sc.errf("an unterminated string")
		default:
			sc.i++
		}
	}
	return sc.errf("an unterminated string")
}

// value reads one value: a string, an array or inline table (nested, comments and
// newlines inside), or a scalar up to a comment or the line's end.
func (sc *tomlScanner) value() error {
	switch c := sc.peek(); c {
	case '"', '\'':
		return sc.str()
	case '[', '{':
		depth := 0
		for sc.i < len(sc.s) {
			switch c := sc.s[sc.i]; c {
			case '"', '\'':
				if err := sc.str(); err != nil {
					return err
				}
				continue
			case '#':
				sc.toEOL()
				continue
			case '[', '{':
				depth++
			case ']', '}':
				depth--
			}
			sc.i++
			if depth == 0 {
				return nil
			}
		}
		return sc.errf("an unterminated array or inline table")
	}
	start := sc.i
	for sc.i < len(sc.s) && !bytes.ContainsRune([]byte("#\r\n"), rune(sc.s[sc.i])) {
		sc.i++
	}
	for sc.i > start && (sc.s[sc.i-1] == ' ' || sc.s[sc.i-1] == '\t') {
		sc.i--
	}
	if sc.i == start {
		return sc.errf("a value is expected")
	}
	return nil
}

// tomlValue is v as a TOML value (BurntSushi/toml's encoding, so escapes are right).
func tomlValue(v any) (string, error) {
	b, err := toml.Marshal(map[string]any{"v": v})
	if err != nil {
		return "", err
	}
	s, ok := strings.CutPrefix(strings.TrimRight(string(b), "\n"), "v = ")
	if !ok {
		return "", fmt.Errorf("encoding %v: unexpected %q", v, b)
	}
	return s, nil
}

// tomlKey is k as a TOML key: bare when it can be, else a basic string.
func tomlKey(k string) string {
	for i := 0; i < len(k); i++ {
		if !isBareKey(k[i]) {
			s, _ := tomlValue(k)
			return s
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

// tomlInline is an env table as an inline table, keys sorted.
func tomlInline(m map[string]any) (string, error) {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v, err := tomlValue(m[k])
		if err != nil {
			return "", err
		}
		parts = append(parts, tomlKey(k)+" = "+v)
	}
	return "{ " + strings.Join(parts, ", ") + " }", nil
}

var (
	ferryTable = []string{"mcp_servers", "ferry"}
	ferryEnv   = []string{"mcp_servers", "ferry", "env"}
)

// wantTOMLEntry is the entry ferry means to leave in a config whose ferry entry is cur
// (nil: none): cur's other keys kept, command and args set, and in env the keys ferry
// writes (ownedEnvKeys) set to entry's values or taken out, other env keys kept; an
// env left empty is dropped.
func wantTOMLEntry(cur map[string]any, entry Server) map[string]any {
	want := map[string]any{}
	for k, v := range cur {
		want[k] = v
	}
	want["command"] = entry.Command
	args := make([]any, len(entry.Args))
	for i, a := range entry.Args {
		args[i] = a
	}
	want["args"] = args
	env := map[string]any{}
	if e, ok := cur["env"].(map[string]any); ok {
		for k, v := range e {
			env[k] = v
		}
	}
	mergeEnv(env, entry.Env)
	delete(want, "env")
	if len(env) > 0 {
		want["env"] = env
	}
	return want
}

// mergeEnv sets in env the keys ferry writes (ownedEnvKeys and any other key of
// from) to from's values, and deletes those of ownedEnvKeys that from lacks.
func mergeEnv(env map[string]any, from map[string]string) {
	for _, k := range ownedEnvKeys {
		delete(env, k)
	}
	for k, v := range from {
		env[k] = v
	}
}

// tomlSnippet is ferry's entry as the tables to paste into config.toml.
func tomlSnippet(entry Server) string {
	t, _, err := editTOMLText(&tomlText{doc: map[string]any{}}, entry, false)
	if err != nil {
		return ""
	}
	return string(t.text)
}

// editTOMLServer sets (or, with remove, deletes) ferry's entry [mcp_servers.ferry] in
// Codex's config.toml, editing its text only (see the top of this file).
func editTOMLServer(entry Server, remove bool) func(any) (any, string, error) {
	return func(d any) (any, string, error) {
		t, action, err := editTOMLText(d.(*tomlText), entry, remove)
		if err != nil {
			return nil, "", err
		}
		return t, action, nil
	}
}

func editTOMLText(t *tomlText, entry Server, remove bool) (*tomlText, string, error) {
	const fixHint = "fix the file, then run ferry connect again; nothing was written"
	servers := map[string]any{}
	if v, ok := t.doc["mcp_servers"]; ok {
		s, ok := v.(map[string]any)
		if !ok {
			return nil, "", errs.Errorf(errs.Invalid, fixHint, "mcp_servers is not a table")
		}
		servers = s
	}
	raw, had := servers["ferry"]
	cur, isTable := raw.(map[string]any)
	if had && !isTable {
		return nil, "", errs.Errorf(errs.Invalid, fixHint, "mcp_servers.ferry is not a table")
	}
	if remove && !had {
		return t, "absent", nil
	}
	var want map[string]any
	if !remove {
		want = wantTOMLEntry(cur, entry)
		if had && reflect.DeepEqual(cur, want) {
			return t, "unchanged", nil
		}
	}
	items, err := scanTOML(t.text)
	if err != nil {
		return nil, "", errs.Errorf(errs.Internal, byHand(entry, remove), "ferry could not read config.toml's layout: %v", err)
	}
	// Refuse an entry ferry would have to edit outside its own tables.
	for _, it := range items {
		if it.header {
			continue
		}
		f := it.full()
		switch {
		case slices.Equal(f, []string{"mcp_servers"}):
			return nil, "", errs.Errorf(errs.Invalid, byHand(entry, remove),
				"mcp_servers is written as an inline table (line %d), which ferry does not edit; nothing was written", lineOf(t.text, it.start))
		case hasPrefix(it.table, ferryTable):
			if len(it.path) > 1 && slices.Contains([]string{"command", "args", "env"}, it.path[0]) && slices.Equal(it.table, ferryTable) {
				return nil, "", errs.Errorf(errs.Invalid, byHand(entry, remove),
					"ferry's %s is written as dotted keys (line %d), which ferry does not edit; nothing was written", it.path[0], lineOf(t.text, it.start))
			}
		case slices.Equal(f, ferryTable):
			return nil, "", errs.Errorf(errs.Invalid, byHand(entry, remove),
				"ferry's entry is written as an inline table (line %d), which ferry does not edit; nothing was written", lineOf(t.text, it.start))
		case hasPrefix(f, ferryTable):
			return nil, "", errs.Errorf(errs.Invalid, byHand(entry, remove),
				"ferry's entry is written as dotted keys (line %d: %s), which ferry does not edit; nothing was written", lineOf(t.text, it.start), strings.Join(f, "."))
		}
	}
	ed := &textEdit{src: t.text}
	if remove {
		for i, it := range items {
			if it.header && hasPrefix(it.path, ferryTable) {
				ed.removeSection(items, i)
			}
		}
	} else if err := editFerryTables(ed, items, cur, want); err != nil {
		return nil, "", err
	}
	out := ed.apply()
	if err := verifyTOMLEdit(t.doc, out, want); err != nil {
		return nil, "", errs.Errorf(errs.Internal, byHand(entry, remove), "ferry's edit of config.toml did not come out as meant (%v); nothing was written", err)
	}
	action := "added"
	switch {
	case remove:
		action = "removed"
	case had:
		action = "updated"
	}
	nd, _ := decodeTOMLMap(out)
	return &tomlText{text: out, doc: nd}, action, nil
}

// byHand is the hint of a refused edit: the tables to paste (or, for remove, what to
// take out).
func byHand(entry Server, remove bool) string {
	if remove {
		return "take ferry's entry out of config.toml by hand"
	}
	return "write ferry's entry by hand as these tables (replacing the one there):\n" + strings.TrimRight(tomlSnippet(entry), "\n")
}

func lineOf(text []byte, off int) int { return 1 + bytes.Count(text[:off], []byte("\n")) }

// editFerryTables makes the text edits that turn ferry's entry cur into want.
func editFerryTables(ed *textEdit, items []tomlItem, cur, want map[string]any) error {
	nl := ed.newline()
	main, envSec := -1, -1
	first := -1
	for i, it := range items {
		if !it.header || it.array {
			continue
		}
		if hasPrefix(it.path, ferryTable) && first < 0 {
			first = i
		}
		switch {
		case slices.Equal(it.path, ferryTable):
			main = i
		case slices.Equal(it.path, ferryEnv):
			envSec = i
		}
	}
	wantEnv, _ := want["env"].(map[string]any)
	// command and args, in [mcp_servers.ferry].
	var add strings.Builder
	for _, k := range []string{"command", "args"} {
		v, err := tomlValue(want[k])
		if err != nil {
			return err
		}
		if main >= 0 {
			if j := findKey(items, main, []string{k}); j >= 0 {
				if !reflect.DeepEqual(cur[k], want[k]) {
					ed.replace(items[j].vStart, items[j].vEnd, v)
				}
				continue
			}
		}
		add.WriteString(k + " = " + v + nl)
	}
	// env: [mcp_servers.ferry.env], or an inline env = {…} in ferry's table.
	var newEnv string
	switch inline := findKey(items, main, []string{"env"}); {
	case envSec >= 0 && len(wantEnv) == 0:
		ed.removeSection(items, envSec)
	case envSec >= 0:
		var addEnv strings.Builder
		curEnv, _ := cur["env"].(map[string]any)
		for _, k := range envKeys(curEnv, wantEnv) {
			j := findKey(items, envSec, []string{k})
			wv, wanted := wantEnv[k]
			switch {
			case j >= 0 && !wanted:
				ed.replace(items[j].start, items[j].end, "")
			case j >= 0 && !reflect.DeepEqual(curEnv[k], wv):
				v, err := tomlValue(wv)
				if err != nil {
					return err
				}
				ed.replace(items[j].vStart, items[j].vEnd, v)
			case j < 0 && wanted:
				v, err := tomlValue(wv)
				if err != nil {
					return err
				}
				addEnv.WriteString(tomlKey(k) + " = " + v + nl)
			}
		}
		ed.insert(sectionEnd(items, envSec), addEnv.String())
	case inline >= 0 && len(wantEnv) == 0:
		ed.replace(items[inline].start, items[inline].end, "")
	case inline >= 0:
		if !reflect.DeepEqual(cur["env"], wantEnv) {
			v, err := tomlInline(wantEnv)
			if err != nil {
				return err
			}
			ed.replace(items[inline].vStart, items[inline].vEnd, v)
		}
	case len(wantEnv) > 0:
		var b strings.Builder
		b.WriteString(nl + "[mcp_servers.ferry.env]" + nl)
		for _, k := range envKeys(wantEnv) {
			v, err := tomlValue(wantEnv[k])
			if err != nil {
				return err
			}
			b.WriteString(tomlKey(k) + " = " + v + nl)
		}
		newEnv = b.String()
	}
	switch {
	case main >= 0:
		ed.insert(sectionEnd(items, main), add.String()+newEnv)
	case first >= 0:
		// Subtables of ferry's entry without its own table: the table goes before them.
		ed.insert(items[first].start, "[mcp_servers.ferry]"+nl+add.String()+newEnv+nl)
	default:
		ed.insert(len(ed.src), ed.separator()+"[mcp_servers.ferry]"+nl+add.String()+newEnv)
	}
	return nil
}

func envKeys(ms ...map[string]any) []string {
	var out []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// findKey is the index of the statement with key k in the table whose header is
// items[h] (-1: none, or h < 0).
func findKey(items []tomlItem, h int, k []string) int {
	if h < 0 {
		return -1
	}
	for j := h + 1; j < len(items) && !items[j].header; j++ {
		if slices.Equal(items[j].path, k) {
			return j
		}
	}
	return -1
}

// sectionEnd is the offset after the last statement of the table whose header is
// items[h] (after the header when it has none); comments and blank lines after that
// belong to what follows.
func sectionEnd(items []tomlItem, h int) int {
	end := items[h].end
	for j := h + 1; j < len(items) && !items[j].header; j++ {
		end = items[j].end
	}
	return end
}

// textEdit collects splices of src and applies them at once.
type textEdit struct {
	src     []byte
	splices []splice
}

type splice struct {
	start, end int
	text       string
}

func (e *textEdit) replace(start, end int, text string) {
	e.splices = append(e.splices, splice{start, end, text})
}

func (e *textEdit) insert(at int, text string) {
	if text == "" {
		return
	}
	if at > 0 && at == len(e.src) && e.src[at-1] != '\n' {
		text = e.newline() + text // the file's last line has no newline
	}
	e.replace(at, at, text)
}

// newline is the file's line ending: CRLF when its first line ends so.
func (e *textEdit) newline() string {
	if i := bytes.IndexByte(e.src, '\n'); i > 0 && e.src[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// separator is the blank line put before a table appended to a file that has text.
func (e *textEdit) separator() string {
	nl := e.newline()
	if len(bytes.TrimSpace(e.src)) == 0 || bytes.HasSuffix(e.src, []byte(nl+nl)) {
		return ""
	}
	return nl
}

// removeSection takes out the table whose header is items[h]: its header and its
// statements, with the blank lines after them (or, at the end of the file, before).
func (e *textEdit) removeSection(items []tomlItem, h int) {
	start, end := items[h].start, sectionEnd(items, h)
	for end < len(e.src) {
		j := end
		for j < len(e.src) && (e.src[j] == ' ' || e.src[j] == '\t' || e.src[j] == '\r') {
			j++
		}
		if j < len(e.src) && e.src[j] != '\n' {
			break
		}
		end = min(j+1, len(e.src))
	}
	if end == len(e.src) {
		for start > 0 && (e.src[start-1] == '\n' || e.src[start-1] == '\r') {
			start--
		}
		if start > 0 {
			start++ // keep the newline ending the line before
			if e.src[start-1] == '\r' {
				start++
			}
		}
	}
	e.replace(start, end, "")
}

// apply returns src with the splices made (they never overlap: each is one item's
// text or value, or an insertion at an item's start or end).
func (e *textEdit) apply() []byte {
	sp := slices.Clone(e.splices)
	// At one offset an insertion comes before a removal that starts there.
	removal := func(s splice) int { // 0 for an insertion (end == start), 1 for a removal
		if s.end == s.start {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(sp, func(a, b splice) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(removal(a), removal(b)))
	})
	var b bytes.Buffer
	at := 0
	for _, s := range sp {
		if s.start < at {
			continue // cannot happen; verifyTOMLEdit would catch what it left out
		}
		b.Write(e.src[at:s.start])
		b.WriteString(s.text)
		at = s.end
	}
	b.Write(e.src[at:])
	return b.Bytes()
}

// verifyTOMLEdit parses the edited text and checks it against the old document: every
// key outside ferry's entry decodes as before, and ferry's entry decodes to want (nil:
// no entry).
func verifyTOMLEdit(old map[string]any, text []byte, want map[string]any) error {
	nd, err := decodeTOMLMap(text)
	if err != nil {
		return fmt.Errorf("the result does not parse: %v", err)
	}
	got, _ := nd["mcp_servers"].(map[string]any)
	gf, hasF := got["ferry"]
	if want == nil && hasF {
		return fmt.Errorf("ferry's entry is still there")
	}
	if want != nil && !reflect.DeepEqual(gf, want) {
		return fmt.Errorf("ferry's entry reads %v, not %v", gf, want)
	}
	if !reflect.DeepEqual(withoutFerry(old), withoutFerry(nd)) {
		return fmt.Errorf("other keys changed")
	}
	return nil
}

// withoutFerry is doc without mcp_servers.ferry (and without mcp_servers when ferry
// was all it held).
func withoutFerry(doc map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		out[k] = v
	}
	if s, ok := out["mcp_servers"].(map[string]any); ok {
		ns := map[string]any{}
		for k, v := range s {
			if k != "ferry" {
				ns[k] = v
			}
		}
		if len(ns) == 0 {
			delete(out, "mcp_servers")
		} else {
			out["mcp_servers"] = ns
		}
	}
	return out
}
