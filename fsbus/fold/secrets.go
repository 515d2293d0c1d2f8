package fold

import (
	"encoding/json"
	"slices"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
)

// CheckRecipient returns not_found when name ("" passes) is not an agent that has
// joined the channel: an order offered to a name nobody holds would wait forever;
// invalid for master (the owner is no agent: it claims nothing); conflict for a
// retired agent.
func (st *State) CheckRecipient(name string) error {
	if name == "" {
		return nil
	}
	if name == MasterWriter {
		return errs.Errorf(errs.Invalid, "the master is the owner, not an agent: offer the order to a seated agent (`ferry agents` lists them), or leave it open",
			"cannot offer an order to master")
	}
	a := st.Agents[name]
	if a == nil || a.JoinKey == "" {
		return errs.Errorf(errs.NotFound, "list agents with `ferry agents`; an agent joins with `ferry join --as "+name+"`", "no agent %s has joined this channel", secretguard.Quote(name))
	}
	if a.Retired {
		return errs.Errorf(errs.Conflict, "offer it to another agent (`ferry agents` lists them)", "agent %s is retired", name)
	}
	return nil
}

func ValidSecretName(n string) bool {
	return ValidName(n) && len(n) <= MaxSecretName
}

// Secrets returns every name in the vault, sorted, each as its newest counted put
// (entryLess: HLC, then writer, device, seq — the fold's order). The puts are snap's
// and, when st was folded from a checkpoint, the base's lines, read first whatever
// their HLCs, then the records above the cut as the fold read them (Split): a name's
// first author is final at the cut (from.go), and a machine that holds only the records
// above the cut reads the same puts as one that holds them all.
func (st *State) Secrets(snap *ledger.Snapshot) map[string]*Secret {
	out := map[string]*Secret{}
	puts := make([]*ledger.Entry, 0, 16)
	entries := snap.Entries
	if b := st.base; b != nil {
		for i := range b.Lines {
			if b.Lines[i].Type == TypeSecretPut {
				puts = append(puts, &b.Lines[i])
			}
		}
		_, entries, _ = Split(snap.Entries, snap.Forks, b.Cut, nil) // what the fold read above the cut
	}
	for i := range entries {
		if e := &entries[i]; e.Type == TypeSecretPut && !st.base.HasLine(e.Hash()) {
			puts = append(puts, e)
		}
	}
	for _, e := range st.baseFirst(puts) {
		if e.Type != TypeSecretPut || !st.Counts(e.Hash()) || !ValidSecretName(e.Ref) {
			continue
		}
		var d SecretData
		if json.Unmarshal(e.Data, &d) != nil || !secretIDRe.MatchString(d.ID) || d.Object == "" {
			continue
		}
		old := out[e.Ref]
		n, owner := 1, e.Writer
		var ignored []string
		if old != nil {
			if e.Writer != old.Owner && e.Writer != MasterWriter {
				// Another author's put (one written where the first had not yet
				// arrived, or past the write check) replaces nothing: ADR 0009 §2.
				if !slices.Contains(old.Ignored, e.Writer) {
					old.Ignored = append(old.Ignored, e.Writer)
					slices.Sort(old.Ignored)
				}
				continue
			}
			n, owner, ignored = old.Puts+1, old.Owner, old.Ignored
		}
		// Entries come in merged (HLC) order: a later one is newer.
		out[e.Ref] = &Secret{Name: e.Ref, ID: d.ID, Author: e.Writer, Recipients: d.Recipients,
			HLC: string(e.HLC), Object: d.Object, Puts: n, Owner: owner, Ignored: ignored, device: e.Device}
	}
	return out
}

// Secret is a name in the vault as the newest counted put left it (never the value).
type Secret struct {
	Name       string   `json:"name"`
	ID         string   `json:"id"`
	Author     string   `json:"author"`
	Recipients []string `json:"recipients"` // sorted, the author included
	HLC        string   `json:"hlc"`
	Object     string   `json:"object"`
	Puts       int      `json:"puts"`  // counted puts of this name that replaced it, this one included
	Owner      string   `json:"owner"` // the writer of the name's first counted put
	// Ignored names the other writers whose puts of this name were ignored (sorted):
	// a name belongs to its first author, and only that author or master replaces it.
	Ignored []string `json:"ignored_authors,omitempty"`

	device string
}

// SecretData is a secret.put entry's data. "recipients", not "to": entryData's to is a
// string, and a list there would make the entry undecodable for every fold.
type SecretData struct {
	Object     string   `json:"object"`
	ID         string   `json:"id"`
	Recipients []string `json:"recipients"`
	Args       string   `json:"args,omitempty"`
}

// MaxSecretName is the longest secret name, in characters: a portable name (docs/design.md §2
// rule 10, ValidName) is at most 63.
const MaxSecretName = 63

// secretIDRe matches a vault object id: s- and 13 Crockford base32 characters (the
// shape of every object id, docs/design.md §2 rule 2), so a path built from it stays in vault/.
var secretIDRe = lazyre.New(`^s-[0-9a-hjkmnp-tv-z]{13}$`)

// PrefixSecret is the id prefix of a vault object.
const PrefixSecret = "s-"

// TypeSecretPut records a value put in the vault (member level).
const TypeSecretPut = "secret.put"

// ValidSecretID reports whether s has the shape of a vault secret id (s- and 13 base32).
func ValidSecretID(s string) bool { return secretIDRe.MatchString(s) }
