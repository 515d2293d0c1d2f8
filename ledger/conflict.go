package ledger

import (
	"strings"
	"unicode/utf8"
)

// Sync tools ParseCopyName recognises (docs/design.md §2 rule 8).
const (
	ToolSyncthing   = "syncthing"    // <stem>.sync-conflict-YYYYMMDD-HHMMSS-<DEVICE><ext>
	ToolDropbox     = "dropbox"      // <stem> ([<Name>'s ]conflicted copy YYYY-MM-DD[ (N)])<ext>
	ToolOneDrive    = "onedrive"     // <stem>-<MACHINE><ext>
	ToolGoogleDrive = "google-drive" // <stem> (N)<ext>
)

// ParseCopyName recognises the name a sync tool gives a conflict copy (or a "keep
// both" duplicate) of a file and returns the name of the file it copies (base) and
// the tool that made it. name is a file name without directory; ok is false, with
// base and tool empty, when name is no known copy name. It strips one level: a copy of
// a copy gives the name of the first copy (call it again for the original).
//
// The name is a hint for people (`ferry doctor` names the tool that made a copy), never
// evidence: readers read every *.jsonl file whatever its name, and the writer and
// device inside each entry say whose record it is (docs/design.md §2 rule 8). A copy
// whose name parses as another writer's segment is still only a copy.
//
// With <ext> the extension (the last "." and what follows it, possibly empty) and
// <stem> a non-empty name without it, the patterns are, tried in this order:
//
//   - Syncthing: <stem>.sync-conflict-YYYYMMDD-HHMMSS-<DEVICE><ext>, DEVICE the first 7
//     characters of the device id ([A-Z2-7]); <stem><ext> must have <ext> as its
//     extension, as Syncthing splits names at the last '.';
//   - Dropbox: <stem> (conflicted copy YYYY-MM-DD)<ext> and
//     <stem> (<Name>'s conflicted copy YYYY-MM-DD)<ext> (the apostrophe ' or ’), each
//     optionally with " (N)" before the closing parenthesis;
//   - Google Drive: <stem> (N)<ext>, N a decimal number of 1–4 digits not starting
//     with 0;
//   - OneDrive: <stem>-<MACHINE><ext>, MACHINE a Windows computer name: 1–15
//     characters of [A-Za-z0-9-], neither starting nor ending with '-', holding at
//     least one upper-case letter. The stem ends at the first '-' after which such a
//     name follows. A machine name without an upper-case letter is not recognised: it
//     cannot be told from an ordinary hyphenated name such as ferry writes; for the
//     same reason the first '-'-separated part of MACHINE must hold an upper-case
//     letter and each other part one too or be all digits ("a-b-PC1.json" is a copy
//     of "a-b.json", "a-0-PC-7.json" of "a-0.json").
//
// A name holding ".sync-conflict-" that matches none of the patterns but OneDrive's is
// no copy (its date and time would be read as a machine name). Dates and times are checked for shape (digits, month 01–12, day 01–31, hour
// 00–23, minute and second 00–59), not against a calendar. ParseCopyName never fails on
// any input (FuzzParseCopyName): a name that is not valid UTF-8, holds a '/' or '\\',
// or is empty gives ok false. None of ferry's own names (segments, objects, presence,
// *.torn-<n>, temp files) parses as a copy.
func ParseCopyName(name string) (base, tool string, ok bool) {
	if name == "" || !utf8.ValidString(name) || strings.ContainsAny(name, "/\\\x00") {
		return "", "", false
	}
	stem, ext := splitExt(name)
	if b, ok := syncthingBase(name); ok {
		return b, ToolSyncthing, true
	}
	if s, ok := dropboxStem(stem); ok {
		return s + ext, ToolDropbox, true
	}
	if s, ok := driveStem(stem); ok {
		return s + ext, ToolGoogleDrive, true
	}
	if strings.Contains(stem, syncthingMark) {
		return "", "", false // Syncthing's infix in a shape Syncthing does not write
	}
	if s, ok := oneDriveStem(stem); ok {
		return s + ext, ToolOneDrive, true
	}
	return "", "", false
}

// splitExt splits name at its last '.' (not at index 0): "a.b.jsonl" → "a.b", ".jsonl".
func splitExt(name string) (stem, ext string) {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[:i], name[i:]
	}
	return name, ""
}

// syncthingMark starts Syncthing's conflict infix.
const syncthingMark = ".sync-conflict-"

// syncthingBase undoes <stem>.sync-conflict-YYYYMMDD-HHMMSS-<DEVICE><ext>. Syncthing
// puts the infix before the extension, so the extension is what follows the infix.
func syncthingBase(name string) (string, bool) {
	i := strings.LastIndex(name, syncthingMark)
	if i <= 0 {
		return "", false
	}
	rest := name[i+len(syncthingMark):] // YYYYMMDD-HHMMSS-DEVICE<ext>
	const fixed = len("YYYYMMDD-HHMMSS-ABCDEFG")
	if len(rest) < fixed {
		return "", false
	}
	stamp, ext := rest[:fixed], rest[fixed:]
	if stamp[8] != '-' || stamp[15] != '-' || !isDate(stamp[0:4], stamp[4:6], stamp[6:8]) || !isTime(stamp[9:15]) {
		return "", false
	}
	for _, c := range []byte(stamp[16:]) {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return "", false
		}
	}
	if ext != "" && (ext[0] != '.' || strings.IndexByte(ext[1:], '.') >= 0) {
		return "", false
	}
	// Syncthing splits at the last '.': a base whose extension is not ext would have
	// been given another name.
	if _, bext := splitExt(name[:i] + ext); bext != ext {
		return "", false
	}
	return name[:i] + ext, true
}

// dropboxStem undoes "<stem> ([<Name>'s ]conflicted copy YYYY-MM-DD[ (N)])".
func dropboxStem(stem string) (string, bool) {
	if !strings.HasSuffix(stem, ")") {
		return "", false
	}
	body := stem[:len(stem)-1]
	if strings.HasSuffix(body, ")") { // " (N)" inside the parentheses
		j := strings.LastIndex(body, " (")
		if j < 0 || !isCounter(body[j+2:len(body)-1]) {
			return "", false
		}
		body = body[:j]
	}
	const mark = "conflicted copy "
	if len(body) < len(mark)+10 {
		return "", false
	}
	date := body[len(body)-10:]
	if date[4] != '-' || date[7] != '-' || !isDate(date[0:4], date[5:7], date[8:10]) {
		return "", false
	}
	head, ok := strings.CutSuffix(body[:len(body)-10], mark)
	if !ok {
		return "", false
	}
	if s, ok := strings.CutSuffix(head, " ("); ok && s != "" {
		return s, true
	}
	// "<stem> (<Name>'s ": the owner's name may hold spaces and parentheses, so take
	// the last " (" that leaves a non-empty name before the possessive.
	for _, apos := range []string{"'s ", "’s "} {
		h, ok := strings.CutSuffix(head, apos)
		if !ok {
			continue
		}
		if j := strings.LastIndex(h, " ("); j > 0 && j+2 < len(h) {
			return h[:j], true
		}
	}
	return "", false
}

// driveStem undoes "<stem> (N)".
func driveStem(stem string) (string, bool) {
	if !strings.HasSuffix(stem, ")") {
		return "", false
	}
	j := strings.LastIndex(stem, " (")
	if j <= 0 || !isCounter(stem[j+2:len(stem)-1]) {
		return "", false
	}
	return stem[:j], true
}

// oneDriveStem undoes "<stem>-<MACHINE>" (see ParseCopyName).
func oneDriveStem(stem string) (string, bool) {
	for i := 1; i < len(stem); i++ {
		if stem[i] == '-' && isMachine(stem[i+1:]) {
			return stem[:i], true
		}
	}
	return "", false
}

// isMachine reports whether s is a Windows computer name (1–15 characters of
// [A-Za-z0-9-], no '-' at either end) whose first '-'-separated part holds an
// upper-case letter and whose other parts each hold one or are all digits.
func isMachine(s string) bool {
	if len(s) == 0 || len(s) > 15 {
		return false
	}
	for i, part := range strings.Split(s, "-") {
		if part == "" {
			return false
		}
		up, lower := false, false
		for _, c := range []byte(part) {
			switch {
			case c >= 'A' && c <= 'Z':
				up = true
			case c >= 'a' && c <= 'z':
				lower = true
			case c >= '0' && c <= '9':
			default:
				return false
			}
		}
		if !up && (lower || i == 0) {
			return false
		}
	}
	return true
}

// isCounter reports whether s is 1–4 decimal digits not starting with 0.
func isCounter(s string) bool {
	if len(s) == 0 || len(s) > 4 || s[0] == '0' {
		return false
	}
	return allDigits(s)
}

// isDate reports whether y, m, d are 4, 2 and 2 digits with m in 01–12, d in 01–31.
func isDate(y, m, d string) bool {
	return len(y) == 4 && allDigits(y) && inRange(m, 1, 12) && inRange(d, 1, 31)
}

// isTime reports whether s is HHMMSS with HH 00–23 and MM, SS 00–59.
func isTime(s string) bool {
	return len(s) == 6 && inRange(s[0:2], 0, 23) && inRange(s[2:4], 0, 59) && inRange(s[4:6], 0, 59)
}

// inRange reports whether s is two digits whose value is in [lo, hi].
func inRange(s string, lo, hi int) bool {
	if len(s) != 2 || !allDigits(s) {
		return false
	}
	v := int(s[0]-'0')*10 + int(s[1]-'0')
	return v >= lo && v <= hi
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
