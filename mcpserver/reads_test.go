package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/mcpserver"
)

// The core reads (docs/design.md §4): compact by default, detail:true
// expands; at most 20 items and 4,000 characters with truncated and a next cursor;
// since returns only what is new — and a read that marks messages read never marks
// one it left out.

// ordersPage is ferry_orders list as the model reads it.
type ordersPage struct {
	Orders []struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		Author  string `json:"author"`
		Updated string `json:"updated"`
	} `json:"orders"`
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
}

func TestOrdersListPages(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})
	for _, detail := range []bool{false, true} {
		seen := map[string]bool{}
		since := ""
		for {
			var p ordersPage
			capped(t, "orders list page", r.ok("ferry_orders", map[string]any{"action": "list", "since": since, "detail": detail}, &p))
			if len(p.Orders) > 20 || p.Next == "" {
				t.Fatalf("detail %v: a page of %d rows, next %q", detail, len(p.Orders), p.Next)
			}
			for _, o := range p.Orders {
				if seen[o.ID] || fold.Terminal(fold.OrderState(o.State)) {
					t.Fatalf("detail %v: %s (%s) listed twice or not active", detail, o.ID, o.State)
				}
				seen[o.ID] = true
				if (o.Author != "" && o.Updated != "") != detail {
					t.Errorf("detail %v: row %+v", detail, o)
				}
			}
			since = p.Next
			if !p.Truncated {
				break
			}
		}
		if len(seen) != 61 {
			t.Errorf("detail %v: walked %d active orders, want 61", detail, len(seen))
		}
		var p ordersPage
		r.ok("ferry_orders", map[string]any{"action": "list", "since": since}, &p)
		if len(p.Orders) != 0 {
			t.Errorf("since the last next: %d orders, want none", len(p.Orders))
		}
	}
	// What changed comes back, and only that.
	var p ordersPage
	r.ok("ferry_orders", map[string]any{"action": "list"}, &p)
	cur := p.Next
	for p.Truncated {
		p = ordersPage{}
		r.ok("ferry_orders", map[string]any{"action": "list", "since": cur}, &p)
		cur = p.Next
	}
	var made struct {
		Order struct {
			ID string `json:"id"`
		} `json:"order"`
	}
	r.ok("ferry_orders", map[string]any{"action": "new", "title": "New since the cursor"}, &made)
	p = ordersPage{}
	r.ok("ferry_orders", map[string]any{"action": "list", "since": cur}, &p)
	if len(p.Orders) != 1 || p.Orders[0].ID != made.Order.ID {
		t.Errorf("since the cursor: %+v, want only %s", p.Orders, made.Order.ID)
	}
	// A cursor of another machine (or a lost log) lists everything: never an error.
	p = ordersPage{}
	r.ok("ferry_orders", map[string]any{"action": "list", "since": "zzzzzzzz.3"}, &p)
	if len(p.Orders) != 20 || !p.Truncated {
		t.Errorf("a foreign cursor: %d orders, want a full first page", len(p.Orders))
	}
}

// orderShown is ferry_orders show as the model reads it.
type orderShown struct {
	Order struct {
		Body     string   `json:"body"`
		BodyURI  string   `json:"body_uri"`
		Progress []string `json:"progress"`
		Reviews  []struct {
			Note string `json:"note"`
		} `json:"reviews"`
	} `json:"order"`
	Truncated bool `json:"truncated"`
}

// TestOrderShowBounded: an order with a 60 KiB body and a dozen long notes shows
// within the cap, compact and with detail, naming the full body by URI.
func TestOrderShowBounded(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	author := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})
	holder := newRig(t, mcpserver.FerryConfig{Agent: "codex-desktop", Open: b.open})
	body := strings.Repeat(`A "quoted" line of the body, with \ and ünïcode.`+"\n", 1200)
	var made struct {
		Order struct {
			ID string `json:"id"`
		} `json:"order"`
	}
	author.ok("ferry_orders", map[string]any{"action": "new", "title": "A big order", "body": body}, &made)
	id := made.Order.ID
	holder.ok("ferry_orders", map[string]any{"action": "claim", "id": id}, nil)
	long := strings.Repeat("progress \"note\" ", 120)
	for i := 0; i < 12; i++ {
		capped(t, "progress result", holder.ok("ferry_orders", map[string]any{"action": "progress", "id": id, "note": fmt.Sprint(i, long)}, nil))
	}
	holder.ok("ferry_orders", map[string]any{"action": "submit", "id": id, "ref": "commit abc", "note": long}, nil)
	author.ok("ferry_orders", map[string]any{"action": "review", "id": id, "verdict": "changes", "note": long}, nil)

	var compact, detail orderShown
	capped(t, "show", author.ok("ferry_orders", map[string]any{"action": "show", "id": id}, &compact))
	capped(t, "show detail", author.ok("ferry_orders", map[string]any{"action": "show", "id": id, "detail": true}, &detail))
	for name, s := range map[string]orderShown{"compact": compact, "detail": detail} {
		if s.Order.BodyURI != "ferry://busy/order/"+id || !s.Truncated || len(s.Order.Progress) == 0 || len(s.Order.Progress) > 10 ||
			!strings.HasPrefix(body, strings.TrimSuffix(s.Order.Body, "…")) {
			t.Errorf("%s show: body %d chars, uri %q, %d progress notes, truncated %v", name, len(s.Order.Body), s.Order.BodyURI, len(s.Order.Progress), s.Truncated)
		}
		if last := s.Order.Progress[len(s.Order.Progress)-1]; !strings.HasPrefix(last, "codex-desktop: 11") {
			t.Errorf("%s show: the newest progress note is %q, want note 11", name, last)
		}
	}
	if len(detail.Order.Body) <= len(compact.Order.Body) && len(detail.Order.Progress) <= len(compact.Order.Progress) {
		t.Errorf("detail shows no more than compact: body %d vs %d, progress %d vs %d",
			len(detail.Order.Body), len(compact.Order.Body), len(detail.Order.Progress), len(compact.Order.Progress))
	}
}

// talkPage is ferry_talk read as the model reads it.
type talkPage struct {
	Messages []struct {
		ID        string `json:"id"`
		Preview   string `json:"preview"`
		Truncated bool   `json:"truncated"`
		URI       string `json:"uri"`
		HLC       string `json:"hlc"`
	} `json:"messages"`
	Truncated bool   `json:"truncated"`
	Remaining int    `json:"remaining"`
	Next      string `json:"next"`
}

// TestTalkReadBounded: fifteen long messages come in reads within the cap; each read
// marks read exactly what it returned, so the next read returns the rest and nothing
// is lost or repeated.
func TestTalkReadBounded(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	sender, err := b.ch.As("codex-laptop")
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for i := 0; i < 15; i++ {
		m, err := sender.TalkSend(fsbus.TalkSendOptions{To: "codex-desktop", Body: fmt.Sprintf("%02d %s", i, strings.Repeat(`"quote" \ `, 100))})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m.ID)
	}
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-desktop", Open: b.open})
	var p talkPage
	capped(t, "peek", r.ok("ferry_talk", map[string]any{"action": "read", "peek": true, "detail": true}, &p))
	if !p.Truncated || p.Remaining+len(p.Messages) != 15 || p.Messages[0].HLC == "" || p.Messages[0].URI == "" {
		t.Errorf("peek with detail: %d messages, remaining %d, first %+v", len(p.Messages), p.Remaining, p.Messages[0])
	}
	var got []string
	for reads := 0; len(got) < 15 && reads < 15; reads++ {
		p = talkPage{}
		capped(t, "read", r.ok("ferry_talk", map[string]any{"action": "read"}, &p))
		for _, m := range p.Messages {
			got = append(got, m.ID)
			if !m.Truncated || m.URI != "ferry://busy/message/"+m.ID || m.HLC != "" {
				t.Errorf("compact line %+v: a cut preview names its URI, no HLC", m)
			}
		}
		if p.Remaining != 15-len(got) {
			t.Errorf("after %d messages: remaining %d", len(got), p.Remaining)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Errorf("reads returned %v, want every message once, in order: %v", got, sent)
	}
	p = talkPage{}
	r.ok("ferry_talk", map[string]any{"action": "read"}, &p)
	if len(p.Messages) != 0 {
		t.Errorf("a read after all were read returned %d", len(p.Messages))
	}
}

// askPage is ferry_ask_human status as the model reads it.
type askStatus struct {
	Asks []struct {
		ID             string `json:"id"`
		State          string `json:"state"`
		Note           string `json:"note"`
		Recommendation string `json:"recommendation"`
	} `json:"asks"`
	Next string `json:"next"`
}

// TestAskStatusSince: status lists my asks compact, detail adds the recommendation, and
// since its next only the asks answered after it.
func TestAskStatusSince(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})
	var ids []string
	for i := 0; i < 3; i++ {
		var a struct {
			ID string `json:"id"`
		}
		r.ok("ferry_ask_human", map[string]any{"action": "raise", "title": fmt.Sprint("Ask ", i), "recommendation": "say yes"}, &a)
		ids = append(ids, a.ID)
	}
	var s askStatus
	r.ok("ferry_ask_human", map[string]any{"action": "status"}, &s)
	if len(s.Asks) != 3 || s.Asks[0].Recommendation != "" || s.Next == "" {
		t.Fatalf("compact status: %+v", s)
	}
	s = askStatus{}
	r.ok("ferry_ask_human", map[string]any{"action": "status", "detail": true}, &s)
	if len(s.Asks) != 3 || s.Asks[0].Recommendation != "say yes" {
		t.Errorf("detailed status: %+v", s)
	}
	cur := s.Next
	master, err := b.ch.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := master.AskAnswer(ids[1], "reject", fsbus.NoteOptions{Note: "not now"}); err != nil {
		t.Fatal(err)
	}
	s = askStatus{}
	r.ok("ferry_ask_human", map[string]any{"action": "status", "since": cur}, &s)
	if len(s.Asks) != 1 || s.Asks[0].ID != ids[1] || s.Asks[0].State != "rejected" || s.Asks[0].Note != "not now" {
		t.Errorf("since the cursor: %+v, want only %s, rejected with its note", s.Asks, ids[1])
	}
	s2 := askStatus{}
	r.ok("ferry_ask_human", map[string]any{"action": "status", "since": s.Next}, &s2)
	if len(s2.Asks) != 0 {
		t.Errorf("since the newest cursor: %+v, want nothing", s2.Asks)
	}
}

// talkDetail is ferry_talk read with detail as the model reads it.
type talkDetail struct {
	Messages []struct {
		ID        string `json:"id"`
		Preview   string `json:"preview"`
		Text      string `json:"text"`
		Truncated bool   `json:"truncated"`
		URI       string `json:"uri"`
		Bytes     int    `json:"bytes"`
	} `json:"messages"`
	Truncated bool `json:"truncated"`
	Remaining int  `json:"remaining"`
}

// TestTalkReadDetailWhole: with detail:true every body comes whole — several that do
// not fit one response together come on the next pages, whole — and a body too long
// for any response is its resource URI with truncated:true, no text cut mid-way; the
// URI gives the whole body. Every message comes once, and every page is within the cap.
func TestTalkReadDetailWhole(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	sender, err := b.ch.As("codex-laptop")
	if err != nil {
		t.Fatal(err)
	}
	mid := func(i int) string {
		return fmt.Sprintf("%d: %s", i, strings.Repeat(`a "quoted" ünïcode line \ `, 60)) // ~1,600 characters
	}
	bodies := []string{mid(0), mid(1), mid(2), strings.Repeat("a long body past any response. ", 400), "short"}
	var ids []string
	want := map[string]string{}
	for _, body := range bodies {
		body = strings.TrimSpace(body) // a body is kept without trailing white space
		m, err := sender.TalkSend(fsbus.TalkSendOptions{To: "codex-desktop", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
		want[m.ID] = body
	}
	long := ids[3]
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-desktop", Open: b.open})
	var got []string
	reads := 0
	for ; len(got) < len(ids) && reads < len(ids); reads++ {
		var p talkDetail
		capped(t, "read with detail", r.ok("ferry_talk", map[string]any{"action": "read", "detail": true}, &p))
		if len(p.Messages) == 0 {
			t.Fatalf("read %d with detail returned nothing, %d of %d seen", reads, len(got), len(ids))
		}
		for _, m := range p.Messages {
			got = append(got, m.ID)
			if m.URI != "ferry://busy/message/"+m.ID || m.Bytes != len(want[m.ID]) || m.Preview != "" {
				t.Errorf("detail line %s: uri %q, bytes %d, preview %q; want its URI, its size and no preview", m.ID, m.URI, m.Bytes, m.Preview)
			}
			switch {
			case m.ID == long && (m.Text != "" || !m.Truncated):
				t.Errorf("the body too long for any response: text of %d characters, truncated %v; want no text, truncated, its URI", len(m.Text), m.Truncated)
			case m.ID != long && (m.Text != want[m.ID] || m.Truncated):
				t.Errorf("message %s with detail: text of %d characters (truncated %v), want the whole body of %d", m.ID, len(m.Text), m.Truncated, len(want[m.ID]))
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("reads with detail returned %v, want every message once, in order: %v", got, ids)
	}
	if reads < 2 {
		t.Errorf("%d read(s) returned three bodies of 1,682 bytes whole within one response of at most 4,000 characters", reads)
	}
	var res struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(r.request("resources/read", `{"uri":"ferry://busy/message/`+long+`"}`), &res); err != nil || len(res.Contents) != 1 {
		t.Fatalf("resources/read of the long message: %+v, %v", res, err)
	}
	var obj struct {
		Body string `json:"body"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &obj); err != nil || obj.Body != want[long] {
		t.Errorf("the long message's URI gives a body of %d characters (%v), want the whole %d", len(obj.Body), err, len(want[long]))
	}
}
