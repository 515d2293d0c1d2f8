package mcpserver

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Resources of `ferry mcp serve` (docs/mcp.md "Resources";
// docs/design.md §4 "Results"):
//
//	ferry://<project>/capabilities      what this server is, serves and never exposes (JSON)
//	ferry://<project>/commands          the CLI's command catalog (JSON, FerryConfig.Commands)
//	ferry://<project>/order/<o-id>      an order's signed object: title, body, labels …
//	ferry://<project>/message/<m-id>    a message's signed object: to, body
//	ferry://<project>/ask/<a-id>        an ask's signed object: title, recommendation, reasoning
//	ferry://<project>/result/<r-id>     a result's signed object: order, reference, summary
//	ferry://<project>/decision/<d-id>   a decision's signed ledger entry (the line is in data)
//
// A read of an object returns its RFC 8785 canonical form, whose sha256 is the object
// hash the signed entry names: the digest a listing shows is the digest of exactly the
// text a read returns, and only objects whose file matches it are served. A listing
// carries summaries only — id, author, time (HLC), bytes, digest — never a title or a
// body (the seed's "metadata-only summaries"): bodies come by URI.
//
// Reads never leave the channel: the id in a URI is checked against the id pattern
// before anything touches the disk, files are opened through an os.Root of the channel
// (no path, and no link, resolves outside it), a symbolic link is refused outright, and
// a file whose canonical hash differs from its entry's is not served.

// Resource MIME type: every resource is JSON.
const resourceMime = "application/json"

// maxObjectFile bounds the bytes read from one object file (bodies are at most 64 KiB,
// fsbus.MaxOrderBody and MaxMessageBody; the rest is envelope).
const maxObjectFile = 1 << 20

// resourceKinds maps a URI kind to its id prefix and channel directory ("" for a
// decision, held in its ledger entry).
var resourceKinds = map[string]struct{ prefix, dir string }{
	"order":    {fold.PrefixOrder, "orders"},
	"message":  {fold.PrefixMessage, "messages"},
	"ask":      {fold.PrefixAsk, "asks"},
	"result":   {fold.PrefixResult, "results"},
	"decision": {fold.PrefixDecision, ""},
}

// Capabilities is what the CLI tells the server about itself for
// ferry://<project>/capabilities. NewFerry fills what is empty: Version from
// FerryConfig.Version, Mode "read-write", Groups ["core"], Exclusions
// DefaultExclusions.
type Capabilities struct {
	Version string `json:"version"`
	// Mode is "read-write" or "read-only" (--read-only).
	Mode string `json:"mode"`
	// Groups are the tool groups enabled: "core", and "admin", "legacy" when opted in.
	Groups []string `json:"groups"`
	// Exclusions say what the server never exposes, whatever the groups.
	Exclusions []string `json:"exclusions"`
	// GatewayError is why the gateway group serves no tools: its config could not be
	// read (FerryConfig.GatewayError); absent otherwise.
	GatewayError string `json:"gateway_error,omitempty"`
}

// DefaultExclusions are what no ferry MCP tool or resource ever reads, accepts or does
// (docs/design.md §2 level table, "The MCP surface can never write the last row";
// docs/threat-model.md "Hostile MCP callers").
var DefaultExclusions = []string{
	"grants: seating, levels, revocation and policy are the owner's, with the CLI",
	"ask answers: only the owner answers asks, with the CLI",
	"secrets: no key, vault or secrets/ file is read or returned",
	"passphrases: never read, accepted or echoed",
	"paths: no file outside the channel; symbolic links are not followed",
	"work content: results carry references to the work, never the work",
}

// capabilitiesDoc is the content of ferry://<project>/capabilities: Capabilities plus
// what the server knows itself.
type capabilitiesDoc struct {
	Server  string `json:"server"`
	Project string `json:"project"`
	Agent   string `json:"agent"`
	Capabilities
	Transport string   `json:"transport"`
	Tools     []string `json:"tools"`
	Resources []string `json:"resources"`
	// Commands summarises the catalog served as ferry://<project>/commands.
	Commands *catalogInfo `json:"commands,omitempty"`
}

// catalogInfo is the command catalog in one line: its leaf commands and digest.
type catalogInfo struct {
	Leaves int    `json:"leaves"`
	Digest string `json:"digest"`
}

// fillCapabilities fills the empty fields of c (see Capabilities).
func fillCapabilities(c Capabilities, version string) Capabilities {
	if c.Version == "" {
		c.Version = version
	}
	if c.Mode == "" {
		c.Mode = "read-write"
	}
	if len(c.Groups) == 0 {
		c.Groups = []string{"core"}
	}
	if len(c.Exclusions) == 0 {
		c.Exclusions = DefaultExclusions
	}
	return c
}

// resources is ferry's Resources: it reads the channel on List and Read only, never at
// start-up. It is safe for concurrent use (it holds no state of its own).
type resources struct {
	f *Ferry
}

// Resources returns ferry's implementation of the MCP resources (see the list above).
func (f *Ferry) Resources() Resources { return &resources{f: f} }

// Templates returns the five object templates (static: no channel read).
func (r *resources) Templates() []ResourceTemplate {
	return []ResourceTemplate{
		{URITemplate: "ferry://{project}/order/{id}", Name: "order", MimeType: resourceMime,
			Description: "An order's signed object: title, body, labels, priority, deps."},
		{URITemplate: "ferry://{project}/message/{id}", Name: "message", MimeType: resourceMime,
			Description: "A message's signed object: to, body."},
		{URITemplate: "ferry://{project}/ask/{id}", Name: "ask", MimeType: resourceMime,
			Description: "An ask's signed object: title, recommendation, reasoning."},
		{URITemplate: "ferry://{project}/result/{id}", Name: "result", MimeType: resourceMime,
			Description: "A submitted result's signed object: order, reference, summary."},
		{URITemplate: "ferry://{project}/decision/{id}", Name: "decision", MimeType: resourceMime,
			Description: "A decision's signed ledger entry; the line is data.line."},
	}
}

// item is one object resource: what its creating entry says about it.
type item struct {
	kind    string
	id      string
	entry   *ledger.Entry // the entry that created it (order.create, msg.post, ask.raise, order.submit, decision.record)
	object  string        // the object hash the entry names ("" for a decision)
	arrival uint64        // the entry's arrival number on this machine
}

// items lists the objects that count in v, in arrival order of their creating
// entries: orders and asks whose object has arrived, messages that are not pending,
// the results named by submits on an order's winning chain, and decisions.
func items(v *fsbus.View) []*item {
	st := v.State
	ignored := map[string]bool{}
	for _, ig := range st.Ignored {
		ignored[ig.Hash] = true
	}
	decisions := map[string]fold.Decision{}
	for _, d := range st.Decisions {
		decisions[d.ID] = d
	}
	seen := map[string]bool{}
	var out []*item
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		h := e.Hash()
		if ignored[h] {
			continue
		}
		var d struct {
			Object string `json:"object"`
			Result string `json:"result"`
		}
		_ = json.Unmarshal(e.Data, &d)
		it := &item{id: e.Ref, entry: e, object: d.Object}
		switch e.Type {
		case fold.TypeOrderCreate:
			o := st.Order(e.Ref)
			if o == nil || o.Missing || len(o.History) == 0 || o.History[0].Hash != h {
				continue
			}
			it.kind = "order"
		case fold.TypeMsgPost:
			m := st.Messages[e.Ref]
			if m == nil || m.Pending || m.From != e.Writer || m.HLC != e.HLC {
				continue
			}
			it.kind = "message"
		case fold.TypeAskRaise:
			a := st.Ask(e.Ref)
			if a == nil || a.Missing || a.Author != e.Writer || a.Raised != e.HLC {
				continue
			}
			it.kind = "ask"
		case fold.TypeOrderSubmit:
			o := st.Order(e.Ref)
			if o == nil || !fold.ValidID(d.Result) || !strings.HasPrefix(d.Result, fold.PrefixResult) || !onChain(o, h) {
				continue
			}
			it.kind, it.id = "result", d.Result
		case fold.TypeDecisionRecord:
			dec, ok := decisions[e.Ref]
			if !ok || dec.By != e.Writer || dec.HLC != e.HLC {
				continue
			}
			it.kind, it.object = "decision", ""
		default:
			continue
		}
		if (it.kind != "decision" && it.object == "") || seen[it.id] {
			continue
		}
		seen[it.id] = true
		it.arrival = v.Arrivals.Number(h)
		out = append(out, it)
	}
	slices.SortStableFunc(out, func(a, b *item) int { return cmp.Compare(a.arrival, b.arrival) })
	return out
}

// onChain reports whether the entry hash h is a step of o's winning chain.
func onChain(o *fold.Order, h string) bool {
	for _, s := range o.History {
		if s.Hash == h {
			return true
		}
	}
	return false
}

// List returns one page of at most maxItems resources: on the first page the
// capabilities and commands documents, then objects in the order they arrived on this
// machine (docs/design.md §2 "The local arrival log, cursors and sightings"). next
// names the arrival number of the page's last object, so it always advances, and
// objects that arrive meanwhile come on later pages; "" when nothing follows. Errors:
// invalid for a cursor this listing did not make (another machine's, or the arrival log
// was rebuilt: list again from the start); the channel's open and load errors.
func (r *resources) List(ctx context.Context, cursor string) ([]Resource, string, error) {
	ch, v, err := r.f.read()
	if err != nil {
		return nil, "", err
	}
	var after uint64
	page := []Resource{}
	if cursor == "" {
		for _, name := range []string{"capabilities", "commands"} {
			text, err := r.static(ch, name)
			if err != nil {
				continue // no catalog handed in: no commands resource
			}
			page = append(page, Resource{URI: r.uri(ch, name), Name: name, MimeType: resourceMime, Size: int64(len(text)),
				Description: "digest " + digestOf(text)})
		}
	} else {
		n, ok := sinceArrival(v.Arrivals, cursor)
		if !ok {
			return nil, "", errs.Errorf(errs.Invalid, "pass the nextCursor of the previous page, or none to start over",
				"cursor %q is not a page of this listing", cursor)
		}
		after = n
	}
	root, err := os.OpenRoot(ch.Root)
	if err != nil {
		return nil, "", fmt.Errorf("opening channel %s: %w", ch.Root, err)
	}
	defer root.Close()
	all := items(v)
	i := sort.Search(len(all), func(i int) bool { return all[i].arrival > after })
	next := ""
	for ; i < len(all); i++ {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		if len(page) == maxItems {
			next = arrivalCursor(v.Arrivals, all[i-1].arrival)
			break
		}
		it := all[i]
		text, err := r.content(root, it)
		if err != nil {
			// Listed only what a read would serve: a refused or damaged file is logged.
			fmt.Fprintf(r.f.cfg.Log, "mcp: resources/list: leaving out %s %s: %v\n", it.kind, it.id, err)
			continue
		}
		page = append(page, Resource{
			URI:         r.uri(ch, it.kind+"/"+it.id),
			Name:        it.id,
			MimeType:    resourceMime,
			Size:        int64(len(text)),
			Description: fmt.Sprintf("%s by %s at %s, digest %s", it.kind, it.entry.Writer, it.entry.HLC, digestOf(text)),
		})
	}
	return page, next, nil
}

// Read returns the contents of one ferry:// URI. Errors: not_found when nothing has
// that URI — another project, an unknown kind, a string that is not an id of that
// kind (checked before anything touches the disk), an object that does not count or
// whose file has not arrived, no catalog handed in; denied when the object's file is
// a symbolic link or not a regular file; invalid when its content does not match the
// hash its signed entry names; the channel's open and load errors.
func (r *resources) Read(ctx context.Context, uri string) ([]ResourceContents, error) {
	project, rest, ok := splitURI(uri)
	if !ok {
		return nil, notFound(uri, "a ferry resource URI is ferry://<project>/<kind>/<id>, /capabilities or /commands")
	}
	var kind, id string
	if rest != "capabilities" && rest != "commands" {
		var found bool
		kind, id, found = strings.Cut(rest, "/")
		k, known := resourceKinds[kind]
		if !found || !known {
			return nil, notFound(uri, "kinds are order, message, ask, result and decision")
		}
		if !fold.ValidID(id) || !strings.HasPrefix(id, k.prefix) {
			article := "a"
			if strings.ContainsRune("aeiou", rune(kind[0])) {
				article = "an"
			}
			return nil, notFound(uri, fmt.Sprintf("%s %s id is %s followed by 13 base32 characters", article, kind, k.prefix))
		}
	}
	ch, err := r.f.channel()
	if err != nil {
		return nil, err
	}
	if project != ch.Project() {
		return nil, notFound(uri, "this server serves project "+ch.Project())
	}
	if kind == "" {
		text, err := r.static(ch, rest)
		if err != nil {
			return nil, err
		}
		return []ResourceContents{{URI: uri, MimeType: resourceMime, Text: text}}, nil
	}
	v, err := ch.Load()
	if err != nil {
		return nil, err
	}
	var it *item
	for _, x := range items(v) {
		if x.kind == kind && x.id == id {
			it = x
			break
		}
	}
	if it == nil {
		return nil, notFound(uri, "no "+kind+" "+id+" counts in this channel on this machine (it may not have arrived yet)")
	}
	root, err := os.OpenRoot(ch.Root)
	if err != nil {
		return nil, fmt.Errorf("opening channel %s: %w", ch.Root, err)
	}
	defer root.Close()
	text, err := r.content(root, it)
	if err != nil {
		return nil, err
	}
	return []ResourceContents{{URI: uri, MimeType: resourceMime, Text: text}}, nil
}

// splitURI splits "ferry://<project>/<rest>"; ok is false for anything else, including
// a query, a fragment, an escape or a project that is not a portable name.
func splitURI(uri string) (project, rest string, ok bool) {
	s, found := strings.CutPrefix(uri, "ferry://")
	if !found || strings.ContainsAny(s, "?#%\\") {
		return "", "", false
	}
	project, rest, found = strings.Cut(s, "/")
	if !found || !fold.ValidName(project) || rest == "" {
		return "", "", false
	}
	return project, rest, true
}

// toolNames lists the tools this server serves, sorted (for the capabilities document).
func (f *Ferry) toolNames() []string {
	names := []string{}
	if f.srv != nil {
		for name := range f.srv.tools {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// notFound is the error of a URI nothing answers to.
func notFound(uri, hint string) error {
	return errs.Errorf(errs.NotFound, hint, "no resource %s", uri)
}

// uri is the URI of a path under the channel's project.
func (r *resources) uri(ch *fsbus.Channel, path string) string {
	return "ferry://" + ch.Project() + "/" + path
}

// digestOf is "sha256:" + the hex of text's sha256 (the object hash, for objects).
func digestOf(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// static returns the capabilities or commands document; not_found for commands when
// the CLI handed in no catalog.
func (r *resources) static(ch *fsbus.Channel, name string) (string, error) {
	cfg := r.f.cfg
	var commands json.RawMessage
	if r.f.commands != nil {
		var err error
		if commands, err = r.f.commands(); err != nil {
			return "", err
		}
	}
	if name == "commands" {
		if len(commands) == 0 {
			return "", notFound(r.uri(ch, name), "this server was started without a command catalog")
		}
		return string(commands), nil
	}
	doc := capabilitiesDoc{
		Server:       "ferry",
		Project:      ch.Project(),
		Agent:        cfg.Agent,
		Capabilities: fillCapabilities(cfg.Capabilities, cfg.Version),
		Transport:    "stdio",
		Tools:        r.f.toolNames(),
		Resources:    []string{r.uri(ch, "capabilities")},
	}
	if len(commands) > 0 {
		var cat struct {
			Commands []json.RawMessage `json:"commands"`
		}
		_ = json.Unmarshal(commands, &cat)
		doc.Commands = &catalogInfo{Leaves: len(cat.Commands), Digest: digestOf(string(commands))}
		doc.Resources = append(doc.Resources, r.uri(ch, "commands"))
	}
	for _, t := range r.Templates() {
		doc.Resources = append(doc.Resources, t.URITemplate)
	}
	b, err := marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding capabilities: %w", err)
	}
	return string(b), nil
}

// content returns the text of one object resource: the canonical form of its object
// file, read through root and checked against the hash its entry names, or the
// canonical form of a decision's entry.
func (r *resources) content(root *os.Root, it *item) (string, error) {
	if it.kind == "decision" {
		c, err := it.entry.Canonical()
		if err != nil {
			return "", fmt.Errorf("encoding entry of %s: %w", it.id, err)
		}
		return string(c), nil
	}
	rel := filepath.Join(resourceKinds[it.kind].dir, it.id+".json")
	raw, err := readInside(root, rel)
	if err != nil {
		return "", err
	}
	c, err := ledger.CanonicalJSON([]byte(strings.TrimSpace(strings.TrimPrefix(string(raw), "\ufeff"))))
	if err != nil || ledger.HashBytes(c) != it.object {
		return "", errs.Errorf(errs.Invalid, "run `ferry ledger verify`",
			"%s does not match the hash its signed entry names", filepath.ToSlash(rel))
	}
	return string(c), nil
}

// readInside reads the regular file rel under root, refusing a symbolic link (even
// one pointing inside the channel), anything but a regular file, a file swapped
// between the check and the open, and more than maxObjectFile bytes. os.Root itself
// refuses a path or a link in a parent directory that resolves outside the channel.
func readInside(root *os.Root, rel string) ([]byte, error) {
	shown := filepath.ToSlash(rel)
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Errorf(errs.NotFound, "it may not have arrived on this machine yet", "%s is missing", shown)
	}
	if err != nil {
		return nil, errs.Errorf(errs.Denied, "ferry reads only regular files inside the channel", "%s cannot be read safely: %v", shown, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, errs.Errorf(errs.Denied, "replace the link by the file itself; ferry never follows links out of the channel",
			"%s is a symbolic link", shown)
	}
	if !fi.Mode().IsRegular() {
		return nil, errs.Errorf(errs.Denied, "ferry reads only regular files inside the channel", "%s is not a regular file", shown)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, errs.Errorf(errs.Denied, "ferry reads only regular files inside the channel", "%s cannot be opened safely: %v", shown, err)
	}
	defer f.Close()
	if got, err := f.Stat(); err != nil || !os.SameFile(fi, got) {
		return nil, errs.Errorf(errs.Denied, "retry; if it persists, run `ferry ledger verify`", "%s changed while it was opened", shown)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxObjectFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", shown, err)
	}
	if len(b) > maxObjectFile {
		return nil, errs.Errorf(errs.Invalid, "run `ferry ledger verify`", "%s is larger than %d bytes", shown, maxObjectFile)
	}
	return b, nil
}
