package search

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestSearch: every kind is found, newest first; all words must appear (any
// case, title or text); an agent sees only its own messages and those to all, the
// owner every message; paging by cursor walks each hit once, and a hit written
// between two pages does not shift the next page; bad input is invalid with a hint.
func TestSearch(t *testing.T) {
	t.Parallel()
	c, clk, ss := primaryWorld(t, map[string]string{"olga": "orchestrator", "mike": "member", "wendy": "member"})
	step := func() { clk.t = clk.t.Add(1e9) }
	for i := range 5 {
		if _, err := ss["mike"].NewOrder(fsbus.NewOrderOptions{Title: fmt.Sprintf("Zebra task %d", i), Body: "stripes"}); err != nil {
			t.Fatal(err)
		}
		step()
	}
	if _, err := ss["olga"].DecisionRecord("Zebra crossings stay painted", ""); err != nil {
		t.Fatal(err)
	}
	step()
	if _, err := ss["mike"].TalkSend(fsbus.TalkSendOptions{To: "wendy", Body: "a zebra between two"}); err != nil {
		t.Fatal(err)
	}
	step()
	if _, err := ss["mike"].AskRaise(fsbus.AskRaiseOptions{Title: "Buy a zebra?", Recommendation: "yes"}); err != nil {
		t.Fatal(err)
	}
	step()
	v := primaryLoad(t, c)

	all, err := Find(c, v, Options{Query: "ZEBRA"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, h := range all.Hits {
		kinds = append(kinds, h.Kind)
	}
	if got := strings.Join(kinds, ","); got != "ask,message,decision,order,order,order,order,order" || all.Total != 8 || all.Next != "" {
		t.Fatalf("owner's search: %s (total %d)", got, all.Total)
	}
	if p, _ := Find(c, v, Options{Query: "zebra", Agent: "olga"}); p.Total != 7 {
		t.Errorf("olga sees another pair's message: total %d", p.Total)
	}
	if p, _ := Find(c, v, Options{Query: "zebra", Agent: "wendy", Kind: "message"}); p.Total != 1 || !strings.Contains(p.Hits[0].Snippet, "zebra between") {
		t.Errorf("wendy's messages: %+v", p)
	}
	if p, _ := Find(c, v, Options{Query: "zebra stripes"}); p.Total != 5 {
		t.Errorf("two words: total %d", p.Total)
	}

	// Pages of 3 walk the 8 hits once; an order written after the first page does
	// not shift the rest.
	first, err := Find(c, v, Options{Query: "zebra", Limit: 3})
	if err != nil || len(first.Hits) != 3 || first.Next == "" {
		t.Fatalf("first page: %+v %v", first, err)
	}
	if _, err := ss["mike"].NewOrder(fsbus.NewOrderOptions{Title: "Zebra task late"}); err != nil {
		t.Fatal(err)
	}
	v = primaryLoad(t, c)
	seen := map[string]bool{}
	for _, h := range first.Hits {
		seen[h.Kind+h.ID] = true
	}
	for cur := first.Next; cur != ""; {
		p, err := Find(c, v, Options{Query: "zebra", Limit: 3, Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range p.Hits {
			if seen[h.Kind+h.ID] {
				t.Fatalf("hit %s twice", h.ID)
			}
			seen[h.Kind+h.ID] = true
		}
		cur = p.Next
	}
	if len(seen) != 8 {
		t.Fatalf("paging saw %d hits, want the 8 older ones", len(seen))
	}

	for _, opt := range []Options{
		{Query: "  "},
		{Query: strings.Repeat("z", fsbus.MaxSearchQuery+1)},
		{Query: "zebra", Kind: "memo"},
		{Query: "zebra", Limit: -1},
		{Query: "zebra", Limit: fsbus.MaxSearchLimit + 1},
		{Query: "zebra", Cursor: "p1"},
		{Query: "zebra", Cursor: "s1.!!!"},
		{Query: "zebra", Cursor: searchCursorPrefix + "bm9udWw"},
	} {
		_, err := Find(c, v, opt)
		var fe *errs.Error
		if !errs.Is(err, errs.Invalid) || !asError(err, &fe) || fe.Hint == "" {
			t.Errorf("%+v: %v; want invalid with a hint", opt, err)
		}
	}
}

func asError(err error, fe **errs.Error) bool {
	e, ok := errs.From(err)
	*fe = e
	return ok
}
