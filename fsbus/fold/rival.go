package fold

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// Rival creates (docs/format.md §12 "Rival creates", docs/threat-model.md).
//
// Ids are 65 random bits (ids.go), so two creating entries (order.create, msg.post,
// ask.raise) of one id by different writers are never a race: one of them is a forgery
// or a replay, signed by its writer. The fold cannot tell which came first without a
// clock, so it picks the one that counts by rules every machine applies alike and no
// grinding of entry hashes can win:
//
//  1. a create whose writer is still seated (not revoked, not retired; the owner always
//     is) beats one whose writer is not — revoking the forger hands the id back;
//  2. then the create whose chain reached the furthest stage through an entry by
//     another writer (docs/design.md §2 branch rule, docs/format.md §14): an order
//     someone claimed, or an ask the owner answered, beats a fresh create, and a forger
//     cannot out-run the real chain with claims and submits of its own;
//  3. then the lower entry hash (the only step a forger can grind, and only against a
//     thing nobody has worked on yet).
//
// The losing create and everything built on it count for nothing (listed as ignored),
// the thing carries a Contest with Rival set naming both writers, and `ferry ledger
// verify` and `ferry doctor` report it as an error: the forgery is signed evidence.
// Two creates of one id by the same writer (a cloned disk, a replayed line) keep the
// older rule: the lower hash counts, as in a fork.

// KindRival is the verify.Report kind of an id created by two writers; CheckRival the
// doctor check.
const (
	KindRival  = "rival"
	CheckRival = "rival_create"
)

// rivalReason is the ignored reason of a losing rival create (VerifyFix matches its
// prefix).
func rivalReason(typ, winner string) string {
	return fmt.Sprintf("rival %s: this id was also created by %s (ids are random: one of the two is forged or replayed)", typ, winner)
}

// addRival adds n to the creates of its id: one per writer (a writer's second create
// of one id resolves by the lower hash, as a fork does, the loser ignored with why),
// kept sorted by hash so the fold does not depend on arrival order.
func addRival[S any](roots map[string][]*chainNode[S], n *chainNode[S], why string, ignore func(*ledger.Entry, string)) {
	list := roots[n.e.Ref]
	for i, r := range list {
		if r.e.Writer != n.e.Writer {
			continue
		}
		switch {
		case r.e.Hash() == n.e.Hash():
			return
		case r.e.Hash() < n.e.Hash():
			ignore(n.e, why)
			return
		}
		ignore(r.e, why)
		list = append(list[:i], list[i+1:]...)
		break
	}
	list = append(list, n)
	slices.SortFunc(list, func(a, b *chainNode[S]) int { return strings.Compare(a.e.Hash(), b.e.Hash()) })
	roots[n.e.Ref] = list
}

// standing is 1 for a writer whose grant holds now (seated, not retired; the owner
// always), 0 otherwise.
func (st *State) standing(writer string) int {
	if writer == MasterWriter {
		return 1
	}
	if a := st.Agents[writer]; a != nil && a.Seated && !a.Retired {
		return 1
	}
	return 0
}

// pickRival picks, among the creates of one id by different writers (len(cands) > 1),
// the one that counts by the rules above; rank gives a create's furthest stage. It
// ignores every other create and everything built on it, and returns the winner and
// the rival contest naming every writer.
func pickRival[S any](st *State, cands []*chainNode[S], rank func(*chainNode[S]) int, ignore func(*ledger.Entry, string)) (*chainNode[S], Contest) {
	type scored struct {
		n                    *chainNode[S]
		base, standing, rank int
	}
	all := make([]scored, len(cands))
	for i, n := range cands {
		all[i] = scored{n, st.rivalAcrossCut(n.e), st.standing(n.e.Writer), rank(n)}
	}
	// A create the checkpoint's base keeps wins over one above its cut (from.go).
	slices.SortStableFunc(all, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.base, a.base), cmp.Compare(b.standing, a.standing), cmp.Compare(b.rank, a.rank), strings.Compare(a.n.e.Hash(), b.n.e.Hash()))
	})
	if all[0].base == 1 && len(all) > 1 && all[1].base == 0 {
		plain := slices.Clone(all)
		slices.SortStableFunc(plain, func(a, b scored) int {
			return cmp.Or(cmp.Compare(b.standing, a.standing), cmp.Compare(b.rank, a.rank), strings.Compare(a.n.e.Hash(), b.n.e.Hash()))
		})
		if plain[0].n != all[0].n {
			st.finality("rival create of " + all[0].n.e.Ref + " kept by the base")
		}
	}
	win := all[0].n
	c := Contest{Ref: win.e.Ref, Winner: stepOf(win), Rival: true}
	who := map[string]bool{}
	for _, s := range all {
		who[s.n.e.Writer] = true
		if s.n == win {
			continue
		}
		c.Losers = append(c.Losers, stepOf(s.n))
		ignore(s.n.e, rivalReason(s.n.e.Type, win.e.Writer))
		for _, ch := range s.n.children {
			ignoreSubtree(ch, "built on an entry that does not count", ignore)
		}
	}
	c.Involved = slices.Sorted(maps.Keys(who))
	return win, c
}

// witnessRank is the rank pickRival compares for a create with a chain: the highest
// stage rank of a valid entry in root's tree written by another writer than root's (0
// when there is none).
func witnessRank[S any](root *chainNode[S], r chainRules[S]) int {
	rankChain(root, r, func(*ledger.Entry, string) {})
	best := 0
	var walk func(n *chainNode[S])
	walk = func(n *chainNode[S]) {
		for _, ch := range n.children {
			if !ch.valid {
				continue
			}
			if rk := r.rank(ch.state); ch.e.Writer != root.e.Writer && rk > best {
				best = rk
			}
			walk(ch)
		}
	}
	walk(root)
	return best
}

// Rivals returns the rival contests of st.
func Rivals(st *State) []Contest {
	out := []Contest{}
	for _, c := range st.Contested {
		if c.Rival {
			out = append(out, c)
		}
	}
	return out
}

// RivalDetail describes a rival contest for verify and doctor: the id, the writer
// that counts and every other writer.
func RivalDetail(c Contest) string {
	var others []string
	for _, l := range c.Losers {
		others = append(others, fmt.Sprintf("%s (%s %s)", l.By, l.Type, Short(l.Hash)))
	}
	return fmt.Sprintf("%s was created by %s (%s %s) and by %s: ids are random, so all but one are forged or replayed; %s's counts",
		c.Ref, c.Winner.By, c.Winner.Type, Short(c.Winner.Hash), strings.Join(others, ", "), c.Winner.By)
}
