package verify

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// Forgery and tampering: every kind of record that counts for nothing is
// listed by `ferry ledger verify` and `ferry doctor` with its reason and a one-line fix.
// The kinds and what produces them:
//
//   - bad_signature: a record whose signature does not verify against the key the
//     roster binds to its writer — edited by hand, forged, signed by another agent's
//     key, or replayed from another channel (the signature covers the project id,
//     docs/design.md §2 "Ledger entry", so a valid record copied from another channel fails);
//   - unknown_key: a record of a writer no seated key covers;
//   - broken_chain: a record whose prev or seq does not follow the one before it;
//   - ignored: a verified record the fold refused (level, role, scope, revoked grant,
//     an object whose hash differs from the one its entry names);
//   - object: an object file that does not parse or whose signature fails;
//   - key_change: a seated name whose newest agent.join announces another key (a name
//     reused by another machine or an impostor). Its records signed with that key are
//     bad_signature records; the change itself is listed, not an error.

// KindKeyChange is the Report kind of a seated agent whose newest join announces
// another key (a name reused with another key).
const KindKeyChange = "key_change"

// KindEdited is the Report kind of an object file whose hash differs from the one
// its creating entry names (edited after it was written, even if re-signed).
const KindEdited = "edited"

// KeyChange is a seated agent whose newest agent.join announces a key other than the
// one its grant binds.
type KeyChange struct {
	Agent    string `json:"agent"`
	Seated   string `json:"seated_key"`
	Announce string `json:"announced_key"`
	App      string `json:"app,omitempty"`
	Machine  string `json:"machine,omitempty"`
}

// verifyFixes is the one-line fix of each kind `ferry ledger verify` lists.
var verifyFixes = map[string]string{
	ledger.KindMalformed:    "the line counts for nothing; that writer's next append moves it aside; restore the segment from another machine if records are missing",
	ledger.KindBrokenChain:  "the records after the break still count, each on its own signature (docs/adr/0007-writer-continuity.md); the missing ones count for nothing until a file holding them is back: put a copy of the segment from the writer's machine into the writer's folder under any *.jsonl name; never edit segments by hand",
	ledger.KindBadSignature: "the record counts for nothing: it was edited, forged, signed with another key or copied from another channel; keep the file as evidence and find who wrote it",
	ledger.KindUnknownKey:   "seat the writer if it is yours (`ferry grant NAME --level member`); otherwise its records count for nothing",
	ledger.KindFork:         "two machines write as one device (a cloned disk or restored backup): on the copy, delete the ferry device file so it gets a device of its own",
	ledger.KindHole:         "records after the NUL bytes are hidden; restore the segment from the writer's machine",
	ledger.KindTorn:         "wait for the sync tool; the writer's next append moves an unfinished tail aside",
	"object":                "the object counts for nothing; restore it from the writer's machine",
	KindEdited:              "the object was changed after its entry was written: it is not shown and its entry counts for nothing; restore it from the writer's machine",
	KindLink:                "ferry never writes through a link inside the channel: replace it with the real directory or file (a link planted in a synced folder can send writes elsewhere)",
	"lost":                  "restore the segment from another machine's copy of the folder or a backup",
	KindVanished:            "restore the writer's segment from a machine that still holds the records (this one read them) or a backup; a cut line can undo a grant or a revocation on machines that never read it; never edit segments by hand; when the owner took the archive out of the folder (`ferry archive move DIR`), verify with `--archive DIR`",
	fold.KindRival:          "ids are random, so a second writer's create of an id is forged or replayed: keep the segment as evidence and revoke the writer that did not create it (`ferry grant revoke NAME`); a create by a revoked writer loses, so the id goes back to its author",
	KindKeyChange:           "if the agent moved to a new key, re-seat it (`ferry grant NAME --key KEY`); otherwise someone else uses the name: its records count for nothing",
}

// VerifyFix returns the one-line fix for a verify kind (a ledger.Kind*, "ignored" with
// its reason, "object", "lost", KindKeyChange); "" for a kind it does not know.
func VerifyFix(kind, reason string) string {
	if kind != "ignored" {
		return verifyFixes[kind]
	}
	switch {
	case strings.Contains(reason, "writer is not seated"):
		return "seat the writer if it is yours (`ferry grant NAME --level member`); otherwise its entries count for nothing"
	case strings.HasPrefix(reason, "writer's grant was revoked"), strings.HasPrefix(reason, "writer was retired"):
		return "nothing to do: the owner ended this writer's grant; re-grant only deliberately"
	case strings.Contains(reason, "signature does not verify"), strings.Contains(reason, "not signed by"):
		return verifyFixes[ledger.KindBadSignature]
	case strings.Contains(reason, "with a bad"):
		break // a malformed entry: the default below
	case strings.Contains(reason, "object differs"):
		return "the object file was edited after its entry was written: restore it from the writer's machine; the entry counts for nothing meanwhile"
	case strings.Contains(reason, "scope"):
		return "nothing to do, or widen the agent's grant (`ferry grant NAME --level LEVEL --scope LABEL`)"
	case strings.Contains(reason, "needs level"):
		return "nothing to do, or raise the writer's grant (`ferry grant NAME --level LEVEL`)"
	case strings.Contains(reason, "pending"):
		return "wait for the sync tool to deliver the entry it builds on"
	case strings.Contains(reason, "superseded"):
		return "nothing to do: two machines changed it at once and every machine folds the same winner (`ferry status` lists the contest)"
	case strings.HasPrefix(reason, "built on"):
		return "nothing to do here: the entry it builds on counts for nothing (listed with its own reason)"
	case strings.Contains(reason, "grant attests"), strings.Contains(reason, "no longer holds the record"):
		return "the writer forked or rewrote its segment inside a grant's bounds after the owner wrote the grant: keep the file as evidence; restore the segment from another machine if real records are missing"
	case strings.HasPrefix(reason, "rival "):
		return verifyFixes[fold.KindRival]
	case strings.HasPrefix(reason, "second "):
		return "nothing to do: two records claim one id; the one with the lower hash counts"
	case strings.HasPrefix(reason, "not allowed"):
		return "nothing to do: the entry broke its thing's rules where it was folded (a race lost to another machine, or a binary that skipped ferry's checks)"
	}
	return "the entry counts for nothing; it was written by a binary or a hand that skipped ferry's checks"
}

// keyChanges lists the seated agents whose newest join announces another key.
func keyChanges(st *fold.State) []KeyChange {
	out := []KeyChange{}
	for _, a := range st.AgentList() {
		if a.Seated && !a.Retired && a.JoinKey != "" && a.Key != a.JoinKey {
			j := a.Joins[a.JoinKey]
			out = append(out, KeyChange{Agent: a.Name, Seated: a.Key, Announce: a.JoinKey, App: j[0], Machine: j[1]})
		}
	}
	return out
}

// ForgeryReport adds to a verify report the edited objects, the key changes and the
// fix of each kind.
func (c *Channel) ForgeryReport(out *Report, v *View) {
	st := v.State
	out.Edited = []string{}
	named := ObjectEntries(c.Root, v.Snapshot)
	for _, p := range slices.Sorted(maps.Keys(named)) {
		e := named[p]
		d, _ := fold.DecodeData(e)
		if IsLink(p) {
			continue // listed as a link, never read
		}
		if _, hash, err := ReadObject(p); err == nil && hash != d.Object {
			out.Edited = append(out.Edited, fmt.Sprintf("%s: hash %s, its %s entry names %s", Rel(c.Root, p), hash, e.Type, d.Object))
		}
	}
	out.KeyChanges = keyChanges(st)
	out.Rivals = fold.Rivals(st)
	out.Links = channelLinks(c.Root)
	out.Fixes = map[string]string{}
	add := func(kind, reason string) {
		key := kind
		if kind == "ignored" {
			key = "ignored: " + reason
		}
		if f := VerifyFix(kind, reason); f != "" {
			out.Fixes[key] = f
		}
	}
	for _, p := range out.Ledger.Problems {
		add(p.Kind, "")
	}
	if len(out.Ledger.Forks) > 0 {
		add(ledger.KindFork, "")
	}
	for _, ig := range out.Ignored {
		add("ignored", ig.Reason)
	}
	if len(out.Objects) > 0 {
		add("object", "")
	}
	if len(out.Lost) > 0 {
		add("lost", "")
	}
	if len(out.Vanished) > 0 {
		add(KindVanished, "")
	}
	if len(out.Edited) > 0 {
		add(KindEdited, "")
	}
	if len(out.Links) > 0 {
		add(KindLink, "")
	}
	if len(out.KeyChanges) > 0 {
		add(KindKeyChange, "")
	}
	if len(out.Rivals) > 0 {
		add(fold.KindRival, "")
	}
}

// doctorKeyChanges reports every key change as a warning, and every link inside the
// channel and every rival create (rival.go) as an error.
func doctorKeyChanges(r *findingList, vr *Report) {
	for _, c := range vr.Rivals {
		r.add(Finding{Check: fold.CheckRival, Level: LevelError, Path: c.Ref, Detail: fold.RivalDetail(c), Fix: verifyFixes[fold.KindRival]})
	}
	for _, l := range vr.Links {
		r.add(Finding{Check: CheckLink, Level: LevelError, Path: l,
			Detail: l + " is a symbolic link inside the channel: writes through it are refused",
			Fix:    verifyFixes[KindLink]})
	}
	for _, k := range vr.KeyChanges {
		r.add(Finding{Check: CheckKeyChange, Level: LevelWarning, Path: k.Agent,
			Detail: fmt.Sprintf("%s is seated with %s but its newest join announces %s (%s on %s): another machine, or someone else, under the same name",
				k.Agent, k.Seated, k.Announce, orDashF(k.App), orDashF(k.Machine)),
			Fix: strings.ReplaceAll(strings.ReplaceAll(verifyFixes[KindKeyChange], "NAME", k.Agent), "KEY", k.Announce)})
	}
}

// CheckKeyChange is the doctor check of a seated name announced with another key;
// CheckLink of a symbolic link inside the channel.
const (
	CheckKeyChange = "key_change"
	CheckLink      = "link"
)

func orDashF(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
