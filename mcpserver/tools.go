package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/runner"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/fsbus/watch"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/textsafe"
)

// Tool names and descriptions are static strings: the tools/list bytes are the same for
// every agent, time, machine and protocol version (docs/design.md §4).

// ---- ferry_join ----

// JoinIn is ferry_join's input (none).
type JoinIn struct{}

// JoinOut is ferry_join's output.
type JoinOut struct {
	Agent    string       `json:"agent"`
	Project  string       `json:"project"`
	Machine  string       `json:"machine"`
	Level    string       `json:"level" jsonschema:"enum=none,enum=worker,enum=member,enum=orchestrator"`
	Granted  bool         `json:"granted"`
	Primary  JoinPrimary  `json:"primary"`
	Alive    []AliveAgent `json:"alive"`
	MineOpen int          `json:"mine_open"`
	// Queue is this machine's job-queue command for heavy orders (docs/runs.md "Heavy
	// orders"), if any.
	Queue string `json:"queue,omitempty"`
	// Sync: stored here, or delivered to every peer (docs/sync.md "Sync health").
	Sync synchealth.Line `json:"sync"`
	// Next is what to do now: "ferry_catchup", or the one command the owner runs.
	Next string `json:"next"`
}

// JoinPrimary is the primary role in ferry_join.
type JoinPrimary struct {
	Name     string `json:"name"`
	AgeS     int64  `json:"age_s"`
	Liveness string `json:"liveness"`
}

// AliveAgent is a teammate this machine saw recently.
type AliveAgent struct {
	Name  string `json:"name"`
	Doing string `json:"doing"`
	AgeS  int64  `json:"age_s"`
}

func (f *Ferry) join(ctx context.Context, args json.RawMessage) (any, error) {
	ch, err := f.channel()
	if err != nil {
		return nil, err
	}
	if err := f.takeLease(ch); err != nil {
		return nil, err
	}
	res, err := fsbus.JoinReporting(ch, f.cfg.Agent, f.clientApp())
	if err != nil {
		return nil, err
	}
	v, err := ch.Load()
	if err != nil {
		return nil, err
	}
	out := &JoinOut{Agent: res.Agent, Project: res.Project, Level: res.Level, Granted: res.Seated, Alive: []AliveAgent{}, Next: "ferry_catchup"}
	if a := v.State.Agents[f.cfg.Agent]; a != nil {
		out.Machine = a.Machine
	}
	if !res.Seated {
		out.Next = "not seated yet: ask the owner to run `" + res.Next + "`; until then you can read but not write"
	}
	ps := ch.PrimaryStatus(v)
	out.Primary = JoinPrimary{Name: ps.Holder, AgeS: ps.AgeS, Liveness: ps.Liveness}
	for _, r := range ch.Agents(v) {
		if r.Name == f.cfg.Agent || r.Liveness != fsbus.Alive || len(out.Alive) == 10 {
			continue
		}
		doing := ""
		if p := v.PresenceOf(r.Name); p != nil {
			doing = p.Doing
		}
		out.Alive = append(out.Alive, AliveAgent{Name: r.Name, Doing: doing, AgeS: r.AgeS})
	}
	out.MineOpen = len(v.State.ListOrders(fold.OrderFilter{State: "active", Mine: f.cfg.Agent}))
	if q, err := runner.ResolveQueue("", ""); err != nil {
		out.Queue = "unusable: " + err.Error()
	} else {
		out.Queue = q.String()
	}
	out.Sync = synchealth.Probe(ctx, ch.Root).Line()
	if res.Wrote {
		if s, err := ch.As(f.cfg.Agent); err == nil && res.Seated {
			f.wrote(s, "joined")
		}
	}
	return out, nil
}

// ---- ferry_catchup ----

// CatchupIn is ferry_catchup's input.
type CatchupIn struct {
	Since string `json:"since,omitempty" jsonschema:"description=next cursor of your last catchup"`
	WaitS int    `json:"wait_s,omitempty" jsonschema:"minimum=0,maximum=50,description=seconds to wait for news since the cursor"`
}

func (f *Ferry) catchup(ctx context.Context, args json.RawMessage) (any, error) {
	var in CatchupIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	// News is an entry by someone else that arrived after the cursor (none: at once).
	if _, err := f.waitFor(ctx, in.WaitS, func(v *fsbus.View) bool { return v.ArrivedSince(in.Since, f.cfg.Agent) }); err != nil {
		return nil, err
	}
	ch, v, err := f.read()
	if err != nil {
		return nil, err
	}
	return ch.Catchup(v, f.cfg.Agent, in.Since), nil
}

// maxWaitS is the longest wait_s (≤ 50 s, under the request timeouts of clients in
// use).
const maxWaitS = 50

// waitFor is the long-poll of wait_s (docs/design.md §4): it blocks for up to waitS
// seconds until news holds on a fresh view of the channel (watch.WaitFor:
// fsnotify on the channel's directories, or polling), the time runs out, or the
// client's input ends (EOFContext), and returns nil then, so the caller answers as
// usual; gone is true when the input ended with nothing new (the client will not see
// the answer: acknowledge nothing). It returns the call's ctx error when the call is
// cancelled (notifications/cancelled), invalid for waitS outside 0–50, and the
// channel's open and load errors. waitS 0 returns at once.
func (f *Ferry) waitFor(ctx context.Context, waitS int, news func(*fsbus.View) bool) (gone bool, err error) {
	if waitS < 0 || waitS > maxWaitS {
		return false, errs.Errorf(errs.Invalid, "pass wait_s from 0 to 50", "wait_s %d is out of range", waitS)
	}
	if waitS == 0 {
		return false, nil
	}
	ch, err := f.channel()
	if err != nil {
		return false, err
	}
	wctx, cancel := context.WithTimeout(EOFContext(ctx), time.Duration(waitS)*time.Second)
	defer cancel()
	_, err = watch.WaitFor(wctx, ch, f.cfg.Watch, news)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(err, context.Canceled):
		return true, nil // EOF
	case err != nil && !errors.Is(err, context.DeadlineExceeded):
		return false, err
	}
	return false, nil
}

// ---- ferry_orders ----

// OrdersIn is ferry_orders' input; fields required by some actions only are checked
// per action (docs/design.md §4).
type OrdersIn struct {
	Action  string `json:"action" jsonschema:"enum=list,enum=show,enum=new,enum=claim,enum=progress,enum=submit,enum=review,enum=release,enum=extend,enum=fail,enum=verify"`
	ID      string `json:"id,omitempty" jsonschema:"description=order id or unique prefix"`
	Title   string `json:"title,omitempty"`
	Body    string `json:"body,omitempty"`
	To      string `json:"to,omitempty" jsonschema:"description=new: offer to this agent"`
	Note    string `json:"note,omitempty" jsonschema:"description=progress/submit/review text"`
	Ref     string `json:"ref,omitempty" jsonschema:"description=submit: commit\\, branch or hand-in id"`
	Result  string `json:"result,omitempty" jsonschema:"description=submit: JSON result"`
	Verdict string `json:"verdict,omitempty" jsonschema:"enum=accept,enum=changes"`
	State   string `json:"state,omitempty" jsonschema:"description=list: state\\, active or ready"`
	Since   string `json:"since,omitempty" jsonschema:"description=list: next of your last list"`
	Detail  bool   `json:"detail,omitempty" jsonschema:"description=list/show: more"`
	Key     string `json:"key,omitempty" jsonschema:"description=idempotency key"`
}

// OrdersOut is ferry_orders' output: rows for list (oldest change first, at most
// maxItems and maxChars; Next is the since of the following list), one order
// otherwise (Truncated when its view was cut to fit).
type OrdersOut struct {
	Orders    []OrderLine `json:"orders,omitempty"`
	Order     *OrderView  `json:"order,omitempty"`
	Truncated bool        `json:"truncated,omitempty"`
	Next      string      `json:"next,omitempty"`
	// Verify is verify's pointer health; Warnings what the call wants the agent to
	// know (a pointed file edited just before dispatch, a claim on a diff).
	Verify   *VerifyView `json:"verify,omitempty"`
	Warnings []string    `json:"warnings,omitempty"`
}

// VerifyView is verify's answer, compact: one line per pointer, "<status> <path>" and
// ": <reason>" when not ok (status ok|changed|missing|refused; the diff's line starts
// "diff "). DiffMode: the files differ but the read-only order's diff covers them.
type VerifyView struct {
	OK       bool     `json:"ok"`
	Pointers []string `json:"pointers"`
	DiffMode bool     `json:"diff_mode,omitempty"`
}

func verifyView(r *contract.PointerReport) *VerifyView {
	v := &VerifyView{OK: r.OK, DiffMode: r.DiffMode, Pointers: []string{}}
	line := func(prefix string, p contract.PointerCheck) string {
		l := prefix + p.Status + " " + p.Path
		if p.Reason != "" {
			l += ": " + p.Reason
		}
		return l
	}
	for _, p := range r.Pointers {
		v.Pointers = append(v.Pointers, line("", p))
	}
	if r.Diff != nil {
		v.Pointers = append(v.Pointers, line("diff ", *r.Diff))
	}
	return v
}

// OrderView is one order, bounded (docs/design.md §4 caps, see viewLevels): the body
// cut to a few hundred characters (detail: a few thousand), the newest progress notes,
// reviews and contests, each note cut; BodyURI names the full body when it was cut.
type OrderView struct {
	fold.OrderRow
	Body      string             `json:"body,omitempty"`
	BodyURI   string             `json:"body_uri,omitempty"`
	Labels    []string           `json:"labels,omitempty"`
	Result    *fold.Submission   `json:"result,omitempty"`
	Reviews   []fold.Review      `json:"reviews,omitempty"`
	Progress  []string           `json:"progress,omitempty"`
	Contested []fsbus.ContestRow `json:"contested,omitempty"`
	RunVia    string             `json:"run_via,omitempty"` // show: direct, or the job-queue command
	Contract  *ContractView      `json:"contract,omitempty"`
	Blocked   string             `json:"blocked,omitempty"` // show: a dependency was cancelled
}

// ContractView is an order's contract, compact (the agent learns the schema before its
// first submit): each pointer "path[:from-to] <size>B sha256:<8 hex>"; the schema as
// compact JSON text, cut to the view's body bound and then saying so (the full order
// object is at body_uri); windows and hints as one line each.
type ContractView struct {
	Task     string   `json:"task,omitempty"`
	ReadOnly bool     `json:"read_only,omitempty"`
	Pointers []string `json:"pointers,omitempty"`
	Diff     string   `json:"diff,omitempty"`
	Schema   string   `json:"schema,omitempty"`
	Windows  string   `json:"windows,omitempty"`
	Heavy    bool     `json:"heavy,omitempty"`
	Hints    string   `json:"hints,omitempty"`
}

// seconds renders a window as 2h, 90m or 45s.
func seconds(s int64) string {
	switch {
	case s%3600 == 0:
		return fmt.Sprintf("%dh", s/3600)
	case s%60 == 0:
		return fmt.Sprintf("%dm", s/60)
	}
	return fmt.Sprintf("%ds", s)
}

// pointerLine is one pointer of a ContractView.
func pointerLine(p fold.Pointer) string {
	s := p.Path
	if p.FirstLine > 0 {
		s += fmt.Sprintf(":%d-%d", p.FirstLine, p.LastLine)
	}
	sha := strings.TrimPrefix(p.SHA256, "sha256:")
	if len(sha) > 8 {
		sha = sha[:8]
	}
	return fmt.Sprintf("%s %dB sha256:%s", s, p.Size, sha)
}

// contractView renders c within l (nil for an order without a contract); cut
// reports whether pointers or the schema were left out.
func contractView(c *fold.Contract, l viewLevel) (cv *ContractView, left bool) {
	if c.Empty() {
		return nil, false
	}
	cv = &ContractView{Task: c.Task, ReadOnly: c.ReadOnly, Heavy: c.Heavy}
	most := max(4*l.rows, 1)
	for i, p := range c.Pointers {
		if i == most {
			cv.Pointers = append(cv.Pointers, fmt.Sprintf("… %d more", len(c.Pointers)-most))
			left = true
			break
		}
		cv.Pointers = append(cv.Pointers, pointerLine(p))
	}
	if c.Diff != nil {
		cv.Diff = pointerLine(*c.Diff)
	}
	if len(c.Schema) > 0 {
		s, cutOff := textsafe.Cut(string(c.Schema), max(l.body, 40))
		if cutOff {
			s += " (truncated: the full schema is in the order object at body_uri)"
			left = true
		}
		cv.Schema = s
	}
	if w := c.Windows; w != nil {
		var parts []string
		for _, x := range []struct {
			name string
			s    int64
		}{{"exec", w.ExecS}, {"lifetime", w.LifetimeS}, {"queue", w.QueueS}} {
			if x.s > 0 {
				parts = append(parts, x.name+" "+seconds(x.s))
			}
		}
		cv.Windows = strings.Join(parts, ", ")
	}
	if h := c.Hints; h != nil {
		var parts []string
		if h.Cores > 0 {
			parts = append(parts, fmt.Sprintf("cores %d", h.Cores))
		}
		if h.RAMGB > 0 {
			parts = append(parts, fmt.Sprintf("ram %g GB", h.RAMGB))
		}
		if h.GPUMemGB > 0 {
			parts = append(parts, fmt.Sprintf("gpu %g GB", h.GPUMemGB))
		}
		if h.ExpectedMinutes > 0 {
			parts = append(parts, fmt.Sprintf("~%d min", h.ExpectedMinutes))
		}
		cv.Hints = strings.Join(parts, ", ")
	}
	return cv, left
}

// viewLevel bounds an OrderView: body characters, newest rows of each list
// (progress, reviews, contests), characters per note.
type viewLevel struct{ body, rows, note int }

// viewLevels are tried in order until the answer fits maxChars: detail starts at the
// first, compact at compactLevel.
var viewLevels = []viewLevel{{3000, 10, 500}, {3000, 5, 300}, {2000, 5, 200}, {1000, 3, 200}, {500, 3, 200}, {300, 2, 120}, {120, 1, 80}, {0, 0, 60}}

const compactLevel = 4

// orderViewFit renders o at the largest level whose answer — wrap(view), the whole
// result the tool returns — fits maxChars, and reports whether anything was left out
// or cut (then BodyURI names the full body when the body was cut).
func orderViewFit(project string, o *fold.Order, detail bool, wrap func(*OrderView) any) (*OrderView, bool) {
	first := compactLevel
	if detail {
		first = 0
	}
	var ov *OrderView
	var cut bool
	for _, l := range viewLevels[first:] {
		ov, cut = orderViewAt(project, o, l)
		if chars(wrap(ov)) <= maxChars {
			break
		}
	}
	return ov, cut
}

// orderViewAt renders o within the bounds of l.
func orderViewAt(project string, o *fold.Order, l viewLevel) (*OrderView, bool) {
	ov := &OrderView{OrderRow: o.Row(), Labels: o.Labels}
	var left, c bool
	if ov.Body, c = textsafe.Cut(o.Body, max(l.body, 1)); c || (l.body == 0 && o.Body != "") {
		left = true
		ov.BodyURI = uri(project, "order", o.ID)
		if l.body == 0 {
			ov.Body = ""
		}
	}
	newest := func(n int) int {
		if n > l.rows {
			left = true
			return n - l.rows
		}
		return 0
	}
	note := func(s string) string {
		s, c := textsafe.Cut(s, l.note)
		left = left || c
		return s
	}
	if o.Result != nil {
		r := *o.Result
		r.Note = note(r.Note)
		ov.Result = &r
	}
	for _, r := range o.Reviews[newest(len(o.Reviews)):] {
		r.Note = note(r.Note)
		ov.Reviews = append(ov.Reviews, r)
	}
	for _, s := range o.Progress[newest(len(o.Progress)):] {
		ov.Progress = append(ov.Progress, note(s.By+": "+s.Note))
	}
	for _, ct := range o.Contests[newest(len(o.Contests)):] {
		ov.Contested = append(ov.Contested, fsbus.ContestRowOf(ct))
	}
	var cl bool
	if ov.Contract, cl = contractView(&o.Contract, l); cl {
		left = true
		ov.BodyURI = uri(project, "order", o.ID)
	}
	return ov, left
}

// orderAnswer is ferry_orders' answer for one order, bounded.
func orderAnswer(project string, o *fold.Order, detail bool) *OrdersOut {
	out := &OrdersOut{}
	out.Order, out.Truncated = orderViewFit(project, o, detail, func(ov *OrderView) any { return &OrdersOut{Order: ov, Truncated: true} })
	return out
}

func (f *Ferry) orders(ctx context.Context, args json.RawMessage) (any, error) {
	var in OrdersIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	switch in.Action {
	case "list":
		state := in.State
		if state == "" {
			state = "active"
		}
		if err := checkState(state); err != nil {
			return nil, err
		}
		_, v, err := f.read()
		if err != nil {
			return nil, err
		}
		return orderPage(v, state, in.Since, f.cfg.Agent, in.Detail, func(rows []OrderLine, truncated bool, next string) any {
			return &OrdersOut{Orders: rows, Truncated: truncated, Next: next}
		}), nil
	case "show":
		if err := need("show", map[string]string{"id": in.ID}); err != nil {
			return nil, err
		}
		ch, v, err := f.read()
		if err != nil {
			return nil, err
		}
		o, err := v.State.FindOrder(in.ID)
		if err != nil {
			return nil, err
		}
		q, _ := runner.ResolveQueue("", "") // an unusable queue: heavy orders run directly
		via, out := q.Via(o), &OrdersOut{}
		blocked := ""
		if !fold.Terminal(o.State) {
			blocked = v.State.BlockedForGood(o)
		}
		out.Order, out.Truncated = orderViewFit(ch.Project(), o, in.Detail, func(ov *OrderView) any {
			ov.RunVia, ov.Blocked = via, blocked
			return &OrdersOut{Order: ov, Truncated: true}
		})
		return out, nil
	case "verify":
		if err := need("verify", map[string]string{"id": in.ID}); err != nil {
			return nil, err
		}
		ch, err := f.channel()
		if err != nil {
			return nil, err
		}
		r, err := ch.VerifyOrder(in.ID, f.cfg.Workspace)
		if err != nil {
			return nil, err
		}
		return &OrdersOut{Verify: verifyView(r)}, nil
	}
	var o *fold.Order
	s, err := f.session()
	if err != nil {
		return nil, err
	}
	switch in.Action {
	case "new":
		if err := need("new", map[string]string{"title": in.Title}); err != nil {
			return nil, err
		}
		o, err = s.NewOrder(fsbus.NewOrderOptions{Title: in.Title, Body: in.Body, To: in.To, Key: in.Key})
	case "claim":
		if err = need("claim", map[string]string{"id": in.ID}); err == nil {
			o, err = s.Claim(in.ID, in.Key)
		}
	case "progress":
		if err = need("progress", map[string]string{"id": in.ID, "note": in.Note}); err == nil {
			o, err = s.Progress(in.ID, fsbus.NoteOptions{Note: in.Note, Key: in.Key})
		}
	case "submit":
		if err = need("submit", map[string]string{"id": in.ID, "ref": in.Ref}); err == nil {
			o, err = s.Submit(in.ID, fsbus.SubmitOptions{Reference: in.Ref, Note: in.Note, Output: json.RawMessage(in.Result), Key: in.Key})
		}
	case "review":
		if err = need("review", map[string]string{"id": in.ID, "verdict": in.Verdict}); err == nil {
			o, err = s.Review(in.ID, in.Verdict, fsbus.NoteOptions{Note: in.Note, Key: in.Key})
		}
	case "release", "extend":
		if err = need(in.Action, map[string]string{"id": in.ID}); err == nil {
			o, err = map[string]func(string, fsbus.NoteOptions) (*fold.Order, error){"release": s.Release, "extend": s.Extend}[in.Action](in.ID, fsbus.NoteOptions{Note: in.Note, Key: in.Key})
		}
	case "fail": // the note is the reason, required
		if err = need("fail", map[string]string{"id": in.ID, "note": in.Note}); err == nil {
			o, err = s.Fail(in.ID, fsbus.NoteOptions{Note: in.Note, Key: in.Key})
		}
	default:
		return nil, errs.Errorf(errs.Invalid, "use list, show, new, claim, progress, submit, review, release, extend, fail or verify", "unknown action %q", in.Action)
	}
	if err != nil {
		return nil, err
	}
	f.wrote(s, in.Action+" "+o.ID)
	out := orderAnswer(s.Project(), o, false)
	out.Warnings = o.Warnings
	return out, nil
}

// ---- ferry_talk ----

// TalkIn is ferry_talk's input.
type TalkIn struct {
	Action string `json:"action" jsonschema:"enum=read,enum=post"`
	To     string `json:"to,omitempty" jsonschema:"description=post: agent\\, master or all"`
	Text   string `json:"text,omitempty"`
	Since  string `json:"since,omitempty" jsonschema:"description=read: cursor"`
	Peek   bool   `json:"peek,omitempty" jsonschema:"description=read without marking read"`
	Detail bool   `json:"detail,omitempty" jsonschema:"description=read: whole texts (one too long comes as its uri)"`
	WaitS  int    `json:"wait_s,omitempty" jsonschema:"minimum=0,maximum=50,description=read: seconds to wait for a message"`
	Key    string `json:"key,omitempty" jsonschema:"description=idempotency key"`
}

// TalkOut is ferry_talk's output: the read result (oldest first, within maxChars;
// Remaining more wait when Truncated; Pending have not arrived yet), or the id of a
// posted message.
type TalkOut struct {
	ID        string     `json:"id,omitempty"`
	Messages  []TalkLine `json:"messages,omitempty"`
	Truncated bool       `json:"truncated,omitempty"`
	Remaining int        `json:"remaining,omitempty"`
	Pending   int        `json:"pending,omitempty"`
	Next      string     `json:"next,omitempty"`
}

func (f *Ferry) talk(ctx context.Context, args json.RawMessage) (any, error) {
	var in TalkIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	switch in.Action {
	case "post", "send":
		if err := need("post", map[string]string{"to": in.To, "text": in.Text}); err != nil {
			return nil, err
		}
		s, err := f.session()
		if err != nil {
			return nil, err
		}
		m, err := s.TalkSend(fsbus.TalkSendOptions{To: in.To, Body: in.Text, Key: in.Key})
		if err != nil {
			return nil, err
		}
		f.wrote(s, "posted to "+in.To)
		return &TalkOut{ID: m.ID}, nil
	case "read":
		// A peek neither writes nor acknowledges: it takes no identity lease.
		s, err := f.session()
		if in.Peek {
			s, err = f.readSession()
		}
		if err != nil {
			return nil, err
		}
		// Wait for what this read would return: a message to me (after the cursor).
		gone, err := f.waitFor(ctx, in.WaitS, func(v *fsbus.View) bool { return v.TalkWaiting(f.cfg.Agent, in.Since) > 0 })
		if err != nil {
			return nil, err
		}
		return f.talkPage(s, in.Since, in.Peek || gone, in.Detail)
	}
	return nil, errs.Errorf(errs.Invalid, "use read or post", "unknown action %q", in.Action)
}

// ---- ferry_primary ----

// PrimaryIn is ferry_primary's input.
type PrimaryIn struct {
	Action string `json:"action" jsonschema:"enum=status,enum=standby,enum=takeover,enum=release"`
	Key    string `json:"key,omitempty" jsonschema:"description=idempotency key"`
}

func (f *Ferry) primary(ctx context.Context, args json.RawMessage) (any, error) {
	var in PrimaryIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if in.Action == "status" || in.Action == "" {
		ch, v, err := f.read()
		if err != nil {
			return nil, err
		}
		return boundPrimary(ch.PrimaryStatus(v).WithSync(synchealth.Probe(ctx, ch.Root))), nil
	}
	s, err := f.session()
	if err != nil {
		return nil, err
	}
	var ps *fsbus.PrimaryStatus
	switch in.Action {
	case "standby":
		ps, err = s.PrimaryStandby(in.Key)
	case "takeover", "take":
		ps, err = s.PrimaryTake(in.Key)
	case "release":
		ps, err = s.PrimaryRelease(in.Key)
	default:
		return nil, errs.Errorf(errs.Invalid, "use status, standby, takeover or release", "unknown action %q", in.Action)
	}
	if err != nil {
		return nil, err
	}
	f.wrote(s, "primary "+in.Action)
	return boundPrimary(ps), nil
}

// ---- ferry_ask_human ----

// AskIn is ferry_ask_human's input.
type AskIn struct {
	Action         string `json:"action" jsonschema:"enum=raise,enum=status"`
	Title          string `json:"title,omitempty"`
	Recommendation string `json:"recommendation,omitempty"`
	Reasoning      string `json:"reasoning,omitempty" jsonschema:"description=at most 1200 characters"`
	ID             string `json:"id,omitempty" jsonschema:"description=status: ask id; omit for all of yours"`
	Since          string `json:"since,omitempty" jsonschema:"description=status: next of your last status"`
	Detail         bool   `json:"detail,omitempty" jsonschema:"description=status: more"`
	Key            string `json:"key,omitempty" jsonschema:"description=idempotency key"`
}

// AskOut is ferry_ask_human's output: one ask (AskLine's fields), or the agent's asks,
// oldest change first, at most maxItems and maxChars (Next is the since of the
// following status).
type AskOut struct {
	AskLine
	Asks      []AskLine `json:"asks,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
	Next      string    `json:"next,omitempty"`
}

func (f *Ferry) ask(ctx context.Context, args json.RawMessage) (any, error) {
	var in AskIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	switch in.Action {
	case "raise":
		if err := need("raise", map[string]string{"title": in.Title, "recommendation": in.Recommendation}); err != nil {
			return nil, err
		}
		s, err := f.session()
		if err != nil {
			return nil, err
		}
		a, err := s.AskRaise(fsbus.AskRaiseOptions{Title: in.Title, Recommendation: in.Recommendation, Reasoning: in.Reasoning, Key: in.Key})
		if err != nil {
			return nil, err
		}
		f.wrote(s, "asked the owner")
		return &AskOut{AskLine: AskLine{ID: a.ID, Title: a.Title, State: string(a.State)}}, nil
	case "status":
		_, v, err := f.read()
		if err != nil {
			return nil, err
		}
		if in.ID != "" {
			a, err := v.State.FindAsk(in.ID)
			if err != nil {
				return nil, err
			}
			return &AskOut{AskLine: askLine(a, in.Detail)}, nil
		}
		return askPage(v, f.cfg.Agent, in.Since, in.Detail), nil
	}
	return nil, errs.Errorf(errs.Invalid, "use raise or status (only the owner answers, with the CLI)", "unknown action %q", in.Action)
}

// tools lists the six core tools (names, descriptions, schemas fixed; docs/design.md
// §4).
func (f *Ferry) tools() []*Tool {
	ts := []*Tool{
		{Name: "ferry_join", Description: "Announce yourself (idempotent). Says your level, the primary, who is alive, and what to do next. Call first.",
			InputSchema: inputSchema(&JoinIn{}), OutputSchema: outputSchema(&JoinOut{}), Call: f.join},
		{Name: "ferry_catchup", Description: "Bounded digest: primary and brief, decisions, open orders, yours, your asks, messages waiting.",
			InputSchema: inputSchema(&CatchupIn{}), OutputSchema: outputSchema(&fsbus.Catchup{}), Call: f.catchup},
		{Name: "ferry_orders", Description: "Orders: list, show, new (title, body, to), claim, progress (note), submit (ref, note, result), review (verdict, note), release, extend, fail (note: reason), verify.",
			InputSchema: inputSchema(&OrdersIn{}), OutputSchema: outputSchema(&OrdersOut{}), Call: f.orders},
		{Name: "ferry_talk", Description: "Messages: read what is new to you (marks it read unless peek), or post text to an agent, master or all.",
			InputSchema: inputSchema(&TalkIn{}), OutputSchema: outputSchema(&TalkOut{}), Call: f.talk},
		{Name: "ferry_primary", Description: "The primary (lead) role: status, standby, takeover (only when status says the holder is silent), release.",
			InputSchema: inputSchema(&PrimaryIn{}), OutputSchema: outputSchema(&fsbus.PrimaryStatus{}), Call: f.primary},
		{Name: "ferry_ask_human", Description: "Ask the owner before a risky step: raise (title, recommendation, reasoning), then status. You cannot answer asks.",
			InputSchema: inputSchema(&AskIn{}), OutputSchema: outputSchema(&AskOut{}), Call: f.ask},
	}
	slices.SortFunc(ts, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return ts
}
