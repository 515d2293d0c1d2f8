package fsbus

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
)

// talkArgs is what data.args hashes for TalkSend: {"body":…,"to":…} (docs/format.md §15).
type talkArgs struct {
	Body string `json:"body"`
	To   string `json:"to"`
}

// TalkSendOptions are the arguments of TalkSend.
type TalkSendOptions struct {
	To   string // an agent that has joined the channel, "master" (the owner) or "all"
	Body string // UTF-8 text of at most MaxMessageBody bytes
	Key  string // idempotency key
}

// TalkSend sends a message: it publishes the signed object messages/<m-id>.json
// {to, body}, then appends msg.post naming the object's hash and the recipient
// (docs/format.md §12). "all" is every agent and the owner but the sender; the body's
// trailing white space is trimmed.
//
// Errors: invalid for a bad or empty recipient, a message to oneself, an empty, over-long
// or non-UTF-8 body; denied below member level (docs/design.md §2 level table); not_found for an
// agent name that never joined; conflict when the idempotency key was used with other
// arguments. A replayed key returns the message the first call sent and writes nothing.
func (s *Session) TalkSend(opt TalkSendOptions) (*fold.Message, error) {
	to, key := strings.TrimSpace(opt.To), opt.Key
	body := strings.TrimRight(opt.Body, " \t\r\n")
	switch {
	case to == "":
		return nil, errs.Errorf(errs.Invalid, "pass --to NAME, --to master or --to all", "a message needs a recipient")
	case !fold.ValidRecipient(to):
		return nil, errs.Errorf(errs.Invalid, "pass --to NAME, --to master or --to all", "cannot send to %s: not an agent name", secretguard.Quote(to))
	case to == s.Name:
		return nil, errs.Errorf(errs.Invalid, "send it to another agent, master or all", "%s cannot send a message to itself", s.Name)
	case strings.TrimSpace(body) == "":
		return nil, errs.Errorf(errs.Invalid, "give the message text, or --body @FILE", "empty message")
	case len(body) > fold.MaxMessageBody:
		return nil, capError("message body", len(body), fold.MaxMessageBody, unitBytes, "put large material in the work repo and send a reference to it")
	case !utf8.ValidString(body):
		return nil, errs.Errorf(errs.Invalid, "write UTF-8 text", "message text must be UTF-8")
	case contract.HasControl(body, true):
		return nil, errs.Errorf(errs.Invalid, "remove terminal escapes and other control characters", "message text holds control characters")
	}
	args := argsHash(talkArgs{Body: body, To: to})
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if ref, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			id = ref
			return nil, nil, err
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeMsgPost); err != nil {
			return nil, nil, err
		}
		if to != fold.ToAll && to != fold.ToMaster {
			if a := v.State.Agents[to]; a == nil || (a.JoinKey == "" && !a.Seated) {
				return nil, nil, errs.Errorf(errs.NotFound, "see `ferry agents` for the agents of this channel", "no agent %s has joined this channel", to)
			} else if !a.Seated {
				return nil, nil, errs.Errorf(errs.Invalid, "ask the owner to seat it first (`ferry grant "+to+"`), or write to master or all",
					"%s is not seated (or was revoked): it could never read the message", to)
			}
		}
		id = fold.NewID(fold.PrefixMessage)
		obj := &fold.MessageObject{Envelope: fold.Envelope{V: 1, ID: id, Author: s.Name, Device: s.Device}, To: to, Body: body}
		data, hash, err := sealObject(obj, func(sig string) { obj.Sig = sig }, s.Signer, s.Project())
		if err != nil {
			return nil, nil, err
		}
		d := fold.EntryData{Object: hash, To: to}
		if key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: fold.TypeMsgPost, Ref: id, Data: mustJSON(d), Idem: key},
			[]pendingObject{{path: verify.ObjectPath(s.Root, s.Name, id), data: data}}, nil
	})
	if err != nil {
		return nil, err
	}
	m := s.viewWithEntry(v, e).State.Messages[id]
	if m == nil {
		return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify`", "message %s is not in the state after writing it", id)
	}
	out := m.View()
	return &out, nil
}

// TalkReadOptions are the arguments of TalkRead.
type TalkReadOptions struct {
	// Since is a cursor from an earlier result's Next: list the messages addressed to
	// me that arrived on this machine after it, read or not. A cursor from another
	// machine or a lost arrival log falls back to the unread messages (never an error).
	Since string `json:"since,omitempty"`
	// Peek reads without recording a read receipt.
	Peek bool `json:"peek,omitempty"`
	// Limit is the most messages to return: 0 means TalkReadLimit, larger values are
	// capped at it.
	Limit int `json:"limit,omitempty"`
	// Bodies also fills each returned message's Body with its whole text (the MCP read
	// with detail). The character budget (TalkReadChars) still counts previews.
	Bodies bool `json:"bodies,omitempty"`
}

// TalkReadResult is what TalkRead returns.
type TalkReadResult struct {
	Agent    string         `json:"agent"`
	Messages []fold.Message `json:"messages"` // oldest first, previews only
	// Truncated is set when Remaining more messages wait: run the read again.
	Truncated bool `json:"truncated,omitempty"`
	Remaining int  `json:"remaining,omitempty"`
	// Pending counts messages to me whose text has not arrived on this machine yet
	// (pending sync): they are listed once it has.
	Pending int `json:"pending,omitempty"`
	// Acked lists the ids this call recorded as read, in one msg.ack ([] on a peek or
	// when every message returned was read before).
	Acked []string `json:"acked"`
	// Since is true when the cursor was used; false when there was none or it fell back.
	Since bool `json:"since"`
	// Compacted is true when the cursor is from before the owner's checkpoint of Epoch
	// and messages after it may be at or below the cut: the unread ones are listed
	// (docs/format.md §21 "Compacted cursors").
	Compacted bool `json:"compacted,omitempty"`
	Epoch     int  `json:"epoch,omitempty"`
	// Next is the cursor to pass as Since next time.
	Next string `json:"next"`
}

// TalkRead returns the messages new to s (`ferry talk read`): addressed to it
// by name or to "all", not sent by it, and not yet acknowledged by it, oldest first,
// at most opt.Limit and TalkReadChars characters of previews, with Truncated and
// Remaining when more wait. With a cursor it returns instead the messages addressed to
// s that arrived after the cursor, read or not, in arrival order; when truncated, Next
// then names the last one returned so nothing is skipped. Pending counts messages to s
// whose text has not arrived; the arrival log records entries, not object files, so a
// message whose post arrived before its file is listed by a read without cursor.
//
// Unless opt.Peek, the read records one msg.ack naming exactly the returned ids s had
// not acknowledged; when there are none it writes nothing, so reading twice returns
// nothing new the second time and writes nothing. The fold → select → append runs
// under the channel lock.
//
// Errors: invalid for a negative limit; denied when s may not write msg.ack (not
// seated) and there is something to acknowledge — peek instead.
func (s *Session) TalkRead(opt TalkReadOptions) (*TalkReadResult, error) {
	if opt.Limit < 0 || opt.Limit > fold.TalkReadLimit {
		return nil, errs.Errorf(errs.Invalid, fmt.Sprintf("pass a limit from 1 to %d (0: the default, %d)", fold.TalkReadLimit, fold.TalkReadLimit), "limit %d is out of range", opt.Limit)
	}
	if opt.Limit == 0 {
		opt.Limit = fold.TalkReadLimit
	}
	var res *TalkReadResult
	var ack []string
	_, _, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		res, ack = talkRead(v, s.Name, opt)
		if opt.Peek || len(ack) == 0 {
			ack = nil
			return nil, nil, nil
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeMsgAck); err != nil {
			return nil, nil, errs.WithHint(err, "meanwhile read with --peek")
		}
		return &ledger.Draft{Type: fold.TypeMsgAck, Data: mustJSON(fold.EntryData{IDs: ack})}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	res.Acked = append([]string{}, ack...)
	markRead(res.Messages, ack, s.Name)
	return res, nil
}

// talkRead selects what TalkRead returns from v, and the ids it would acknowledge.
func talkRead(v *View, me string, opt TalkReadOptions) (*TalkReadResult, []string) {
	st, arr := v.State, v.Arrivals
	res := &TalkReadResult{Agent: me, Messages: []fold.Message{}, Next: arr.Cursor()}
	var picked []*fold.Message
	n, ok := arr.ParseCursor(opt.Since)
	if ok && opt.Since != "" {
		res.Epoch = v.compactedEpoch(n)
		res.Compacted = res.Epoch > 0
	}
	if ok && opt.Since != "" && !res.Compacted {
		res.Since = true
		picked = st.MessagesWhere(func(m *fold.Message) bool {
			return m.AddressedTo(me) && !m.Pending && arr.Number(m.Post) > n
		})
		slices.SortStableFunc(picked, func(a, b *fold.Message) int { return cmp.Compare(arr.Number(a.Post), arr.Number(b.Post)) })
	} else {
		picked = st.Unread(me)
	}
	for _, m := range st.Messages {
		if m.Pending && m.AddressedTo(me) && !m.ReadByName(me) {
			res.Pending++
		}
	}
	var ack []string
	chars := 0
	for i, m := range picked {
		c := utf8.RuneCountInString(m.Preview)
		if i == opt.Limit || (i > 0 && chars+c > fold.TalkReadChars) {
			res.Truncated, res.Remaining = true, len(picked)-i
			// The cursor stops below every message left out, so a read from it lists
			// them (some shown now may come again); unread messages are in no arrival
			// order (else --since next would skip them).
			next := arr.Complete()
			for _, rest := range picked[i:] {
				if n := arr.Number(rest.Post); n > 0 && n-1 < next {
					next = n - 1
				}
			}
			res.Next = fmt.Sprintf("%s.%d", arr.LogID, next)
			break
		}
		chars += c
		mv := m.View()
		if opt.Bodies {
			mv.Body = m.FullBody
		}
		res.Messages = append(res.Messages, mv)
		if !m.ReadByName(me) {
			ack = append(ack, m.ID)
		}
	}
	return res, ack
}

// TalkAckResult is what TalkAck returns.
type TalkAckResult struct {
	Messages []fold.Message `json:"messages"` // the messages named, with their read receipts
	Acked    []string       `json:"acked"`    // ids this call recorded as read ([] when all were)
}

// TalkAck records that s has read the named messages (ids or unique prefixes, at most
// TalkReadLimit) without listing them: after a `talk read --peek`, say. It writes one
// msg.ack naming the ones not acknowledged yet; nothing when there are none.
//
// Errors: invalid for no ids, too many, or an ambiguous prefix; not_found for an
// unknown id; denied for a message not addressed to s (or sent by it): a receipt is
// given only by an addressee (docs/format.md §12), and below worker level;
// retry_needed for a message whose text has not arrived on this machine.
func (s *Session) TalkAck(ids []string) (*TalkAckResult, error) {
	if len(ids) == 0 || len(ids) > fold.TalkReadLimit {
		return nil, errs.Errorf(errs.Invalid, "name the messages by id, as `ferry talk read --peek` lists them", "acknowledge 1 to %d messages at a time", fold.TalkReadLimit)
	}
	var res *TalkAckResult
	var ack []string
	_, _, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		res, ack = &TalkAckResult{Messages: []fold.Message{}}, nil
		for _, q := range ids {
			m, err := v.State.TalkShow(q)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case !m.AddressedTo(s.Name):
				return nil, nil, errs.Errorf(errs.Denied, "acknowledge only messages to you or to all (`ferry talk read`)", "message %s is from %s to %s, not addressed to %s", m.ID, m.From, m.To, s.Name)
			case m.Pending:
				return nil, nil, errs.Errorf(errs.RetryNeeded, "wait for the sync tool to deliver messages/"+m.ID+".json, then retry", "message %s has not arrived on this machine", m.ID)
			}
			if slices.ContainsFunc(res.Messages, func(x fold.Message) bool { return x.ID == m.ID }) {
				continue
			}
			m.Body = ""
			res.Messages = append(res.Messages, *m)
			if !m.ReadByName(s.Name) {
				ack = append(ack, m.ID)
			}
		}
		if len(ack) == 0 {
			return nil, nil, nil
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeMsgAck); err != nil {
			return nil, nil, err
		}
		return &ledger.Draft{Type: fold.TypeMsgAck, Data: mustJSON(fold.EntryData{IDs: ack})}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	res.Acked = append([]string{}, ack...)
	markRead(res.Messages, ack, s.Name)
	return res, nil
}

// markRead adds name to the read_by of the messages acked names.
func markRead(ms []fold.Message, acked []string, name string) {
	for i := range ms {
		m := &ms[i]
		if slices.Contains(acked, m.ID) {
			if j, found := slices.BinarySearch(m.ReadBy, name); !found {
				m.ReadBy = slices.Insert(m.ReadBy, j, name)
			}
		}
	}
}
