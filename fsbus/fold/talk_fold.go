package fold

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/ledger"
)

// Recipients that are not agent names (docs/design.md §3 `ferry talk send --to NAME|all`).
const (
	// ToAll addresses every agent of the channel and the owner, except the sender.
	ToAll = "all"
	// ToMaster addresses the human owner (the writer "master").
	ToMaster = MasterWriter
)

// PreviewRunes is the length of a message preview in characters (runes): longer bodies
// are read in full with `ferry talk show` (docs/mcp.md).
const PreviewRunes = 300

// MessageObject is messages/<id>.json: a message body, signed by its sender
// (docs/format.md §11). To is an agent name, "master" or "all"; Body is UTF-8 text of
// 1 byte to MaxMessageBody bytes.
type MessageObject struct {
	Envelope
	To   string `json:"to"`
	Body string `json:"body"`
}

// Message is a message as folded from its msg.post entry and its object, with the
// read receipts (msg.ack entries of its addressees) it collected.
//
// Body is set only by State.TalkShow; every other view carries the Preview: the first
// PreviewRunes characters, with Truncated set when the body is longer. A message whose
// object has not arrived on this machine is Pending: its sender, recipient and time are
// known from the signed entry, its text is not (docs/design.md §2 rule 6, "pending sync").
type Message struct {
	ID        string   `json:"id"`
	From      string   `json:"from"`
	To        string   `json:"to"`  // agent name, "master" or "all"
	HLC       string   `json:"hlc"` // of the msg.post entry
	Bytes     int      `json:"bytes"`
	Preview   string   `json:"preview"`
	Truncated bool     `json:"truncated,omitempty"`
	Body      string   `json:"body,omitempty"`
	ReadBy    []string `json:"read_by"` // addressees that acknowledged it, sorted
	Pending   bool     `json:"pending,omitempty"`

	FullBody string `json:"-"` // the full body (empty while pending)
	Post     string `json:"-"` // hash of the msg.post entry
}

// AddressedTo reports whether name is an addressee of m: named by it, or any writer but
// the sender when m is to "all". A sender is never an addressee of its own message.
func (m *Message) AddressedTo(name string) bool {
	return name != m.From && (m.To == name || m.To == ToAll)
}

// ReadByName reports whether name has acknowledged m.
func (m *Message) ReadByName(name string) bool {
	_, ok := slices.BinarySearch(m.ReadBy, name)
	return ok
}

// View returns a copy of m for a result: its own read_by list, never null.
func (m *Message) View() Message {
	c := *m
	c.ReadBy = append([]string{}, m.ReadBy...)
	return c
}

// preview returns the first n runes of s and whether s is longer.
func preview(s string, n int) (string, bool) {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], true
		}
		i++
	}
	return s, false
}

// ValidRecipient reports whether to may be named in msg.post data.to.
func ValidRecipient(to string) bool { return to == ToAll || ValidName(to) }

// foldTalk folds msg.post and msg.ack entries into st.Messages (docs/format.md §12).
//
// A msg.post counts when its ref is a message id, data.to a recipient and data.object
// the hash of the object file messages/<ref>.json; the file not yet arrived leaves the
// message Pending, a file with another hash, that does not parse, or whose id, author
// or to differs from the entry's is ignored (edited or forged, like orders). Two posts under
// one id: the lower entry hash counts.
//
// A msg.ack names message ids in data.ids. Each id is a read receipt of the ack's writer
// when that message counts and is addressed to the writer (to it by name, or to "all"
// and not written by it); ids that do not qualify are skipped one by one, and the entry
// is listed as ignored only when none qualifies. Posts are folded before acks, so the
// result does not depend on the order in which entries arrived.
func foldTalk(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
	posts := map[string][]*chainNode[struct{}]{}
	var acks []*ledger.Entry
	for _, e := range entries {
		switch e.Type {
		case TypeMsgPost:
			d := st.dataOf(e)
			if !ValidID(e.Ref) || !strings.HasPrefix(e.Ref, PrefixMessage) || !ValidRecipient(d.To) || d.Object == "" {
				ignore(e, "msg.post with a bad message id, recipient or object hash")
				continue
			}
			addRival(posts, &chainNode[struct{}]{e: e, d: d}, "second msg.post for an existing message id", ignore)
		case TypeMsgAck:
			acks = append(acks, e)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(posts)) {
		cands := posts[id]
		msgs := map[*chainNode[struct{}]]*Message{}
		for _, n := range cands {
			e, d := n.e, n.d
			m := &Message{ID: id, From: e.Writer, To: d.To, HLC: e.HLC, ReadBy: []string{}, Post: e.Hash()}
			if !loadMessageObject(m, in, d.Object) {
				if len(cands) == 1 {
					ignore(e, "message object differs from the hash its msg.post names")
					continue
				}
				// A rival post (rival.go): the object file decides nothing.
				m.FullBody, m.Preview = "", "(object replaced by another writer; restore it from the author's machine)"
			}
			msgs[n] = m
		}
		if len(msgs) == 0 {
			continue
		}
		win := cands[0]
		if len(cands) > 1 {
			var c Contest
			win, c = pickRival(st, cands, func(*chainNode[struct{}]) int { return 0 }, ignore)
			st.Contested = append(st.Contested, c)
		}
		st.Messages[id] = msgs[win]
	}
	for _, e := range acks {
		d := st.dataOf(e)
		n := 0
		for _, id := range d.IDs {
			m := st.Messages[id]
			if m == nil || !m.AddressedTo(e.Writer) {
				continue
			}
			n++
			if i, found := slices.BinarySearch(m.ReadBy, e.Writer); !found {
				m.ReadBy = slices.Insert(m.ReadBy, i, e.Writer)
			}
		}
		if n == 0 {
			ignore(e, "msg.ack names no message addressed to "+e.Writer)
		}
	}
}

// loadMessageObject fills m's text from its object file. It reports false when the
// file exists but does not match the entry (see foldTalk); a file not yet arrived
// leaves m Pending.
func loadMessageObject(m *Message, in FoldInput, object string) bool {
	if in.Objects == nil {
		m.Pending = true
		return true
	}
	c, hash, err := in.Objects(m.From, m.ID)
	if err != nil {
		if errors.Is(err, ErrObjectMissing) {
			m.Pending = true
			return true
		}
		return false
	}
	if hash != object {
		return false
	}
	var obj MessageObject
	if err := JSONUnmarshal(c, &obj); err != nil || obj.ID != m.ID || obj.Author != m.From || obj.To != m.To || !utf8.ValidString(obj.Body) {
		return false
	}
	m.FullBody, m.Bytes = obj.Body, len(obj.Body)
	m.Preview, m.Truncated = preview(obj.Body, PreviewRunes)
	return true
}

// MessagesWhere returns the messages f selects, oldest first (HLC, then id).
func (st *State) MessagesWhere(f func(m *Message) bool) []*Message {
	var out []*Message
	for _, m := range st.Messages {
		if f(m) {
			out = append(out, m)
		}
	}
	sortMessages(out)
	return out
}

func sortMessages(ms []*Message) {
	slices.SortFunc(ms, func(a, b *Message) int {
		return cmp.Or(strings.Compare(a.HLC, b.HLC), strings.Compare(a.ID, b.ID))
	})
}

// Unread returns the messages waiting on name, oldest first: addressed to it (by name,
// or to "all" and not sent by it), arrived on this machine, and not yet acknowledged by
// it. name is an agent name or "master" for the owner. It is the list `ferry catchup`
// and `ferry status` summarise; it reads no clock.
func (st *State) Unread(name string) []*Message {
	return st.MessagesWhere(func(m *Message) bool {
		return m.AddressedTo(name) && !m.Pending && !m.ReadByName(name)
	})
}
