package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/mcpserver"
)

// syncBuf is a log writer the server's goroutines may share.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secretShapes are the token shapes every string property is tried with: free text (a
// GitHub token), a portable name (a GitLab token: passes the syntax of names, labels
// and ids), and a JSON object whose member name is a token (a structured result's
// keys), so each reaches the secret guard past the field's own syntax.
// Each case has tokens of its own (seed), so a value found in the channel names the
// call that wrote it.
func secretShapes(seed uint64) []string {
	lower := strings.ToLower(fakeTok(3*seed+1, 24))
	return []string{
		"ghp_" + fakeTok(3*seed, 36),
		"glpat-" + lower,
		`{"ok":{"ghp_` + fakeTok(3*seed+2, 36) + `":1}}`,
	}
}

// tokenOf is the credential inside a shape (what must never come back or be written).
func tokenOf(shape string) string {
	if i := strings.Index(shape, "ghp_"); i >= 0 {
		return shape[i : i+40]
	}
	return shape
}

// TestSecretFieldsMCP is the secret guard's table over MCP: every tool the server
// lists (core, admin and legacy groups) × every action its input schema enumerates ×
// every string property of the schema, each set to three token-shaped values (-short:
// one, in turn). The call is refused, or the value appears nowhere: not in the answer,
// not in any file of the channel folder, not in the server's log. The properties and
// actions come from the served input schemas, so a new one is in the table without an
// edit; an action whose base arguments this table lacks fails it. ferry_join has no
// properties: the app name it announces is the client's name from initialize, tried
// on its own.
func TestSecretFieldsMCP(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	var log syncBuf
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Log: &log,
		Groups: []string{mcpserver.GroupAdmin, mcpserver.GroupLegacy}})
	other, err := b.ch.As("claude-code-laptop")
	if err != nil {
		t.Fatal(err)
	}
	me, err := b.ch.As("codex-laptop")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A case gets fresh things to act on after a call that succeeded, so no call finds
	// its precondition gone.
	open := func() string {
		o, err := other.NewOrder(fsbus.NewOrderOptions{Title: "plain"})
		must(err)
		return o.ID
	}
	held := func() string {
		id := open()
		_, err := me.Claim(id, "")
		must(err)
		return id
	}
	submitted := func() string {
		o, err := me.NewOrder(fsbus.NewOrderOptions{Title: "mine"})
		must(err)
		_, err = other.Claim(o.ID, "")
		must(err)
		_, err = other.Submit(o.ID, fsbus.SubmitOptions{Reference: "main", Note: "done"})
		must(err)
		return o.ID
	}
	type base struct {
		args func() map[string]any
	}
	none := func() map[string]any { return map[string]any{} }
	bases := map[string]base{
		"ferry_orders list":      {none},
		"ferry_orders show":      {func() map[string]any { return map[string]any{"id": open()} }},
		"ferry_orders verify":    {func() map[string]any { return map[string]any{"id": open()} }},
		"ferry_orders new":       {func() map[string]any { return map[string]any{"title": "t"} }},
		"ferry_orders claim":     {func() map[string]any { return map[string]any{"id": open()} }},
		"ferry_orders progress":  {func() map[string]any { return map[string]any{"id": held(), "note": "n"} }},
		"ferry_orders submit":    {func() map[string]any { return map[string]any{"id": held(), "ref": "main"} }},
		"ferry_orders review":    {func() map[string]any { return map[string]any{"id": submitted(), "verdict": "accept"} }},
		"ferry_orders release":   {func() map[string]any { return map[string]any{"id": held()} }},
		"ferry_orders extend":    {func() map[string]any { return map[string]any{"id": held()} }},
		"ferry_orders fail":      {func() map[string]any { return map[string]any{"id": held(), "note": "n"} }},
		"ferry_talk read":        {func() map[string]any { return map[string]any{"peek": true} }},
		"ferry_talk post":        {func() map[string]any { return map[string]any{"to": "all", "text": "hi"} }},
		"ferry_primary status":   {none},
		"ferry_primary standby":  {none},
		"ferry_primary takeover": {none},
		"ferry_primary release":  {none},
		"ferry_ask_human raise":  {func() map[string]any { return map[string]any{"title": "t", "recommendation": "r"} }},
		"ferry_ask_human status": {none},
		"ferry_update check":     {none},
		"ferry_update apply":     {none},
		"ferry_catchup":          {none},
		"ferry_join":             {none},
		"ferry_search":           {func() map[string]any { return map[string]any{"query": "plain"} }},
		"ferry_get":              {func() map[string]any { return map[string]any{"uri": "ferry://" + b.ch.Project() + "/order/" + open()} }},
		"ferry_status":           {none},
		"channel_status":         {none},
		"discover":               {none},
		"list_tasks":             {none},
		"get_task":               {func() map[string]any { return map[string]any{"id": open()} }},
		"read_memory":            {none},
		"list_ledger":            {none},
		"list_learnings":         {none},
		"list_engines":           {none},
	}
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.request("tools/list", `{}`), &list); err != nil {
		t.Fatal(err)
	}
	cases := 0
	var written []string // every token a call was given
	for _, tl := range list.Tools {
		var schema struct {
			Properties map[string]struct {
				Type string   `json:"type"`
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil {
			t.Fatalf("%s: input schema: %v", tl.Name, err)
		}
		actions := []string{""}
		if a, ok := schema.Properties["action"]; ok {
			actions = a.Enum
		}
		var props []string
		for p, s := range schema.Properties {
			if s.Type == "string" || s.Type == "object" {
				props = append(props, p)
			}
		}
		sort.Strings(props)
		for _, action := range actions {
			key := strings.TrimSpace(tl.Name + " " + action)
			bs, ok := bases[key]
			if !ok {
				t.Errorf("%s: no base arguments in this table: add them to bases", key)
				continue
			}
			var prepared map[string]any // reused until a call succeeds (a refusal changes nothing)
			for _, p := range props {
				shapes := []int{0, 1, 2}
				if testing.Short() {
					shapes = []int{cases % 3} // -short: one shape per property, each in turn
				}
				for _, i := range shapes {
					shape := secretShapes(uint64(100 + cases))[i]
					if prepared == nil {
						prepared = bs.args()
					}
					args := map[string]any{}
					for k, v := range prepared {
						args[k] = v
					}
					if action != "" {
						args["action"] = action
					}
					var v any = shape
					if schema.Properties[p].Type == "object" {
						v = map[string]any{tokenOf(shape): 1}
					}
					args[p] = v
					cases++
					tok := tokenOf(shape)
					written = append(written, tok)
					rep := r.call(tl.Name, args)
					if !rep.IsError {
						prepared = nil
					}
					if strings.Contains(rep.Text, tok) || strings.Contains(string(rep.Structured), tok) {
						t.Errorf("%s %s=%.20s…: the answer holds the value: %.300s", key, p, shape, rep.Text)
					}
					if !rep.IsError && strings.Contains(channelText(t, b.dir), tok) {
						t.Errorf("%s %s=%.20s…: the value was written to the channel (%.200s)", key, p, shape, rep.Text)
					}
					if strings.Contains(log.String(), tok) {
						t.Errorf("%s %s=%.20s…: the server's log holds the value", key, p, shape)
					}
				}
			}
		}
	}
	for key := range bases {
		name, action, _ := strings.Cut(key, " ")
		if !slices.ContainsFunc(list.Tools, func(tl struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}) bool {
			return tl.Name == name && (action == "" || strings.Contains(string(tl.InputSchema), `"`+action+`"`))
		}) {
			t.Errorf("bases names %s, which the server does not serve", key)
		}
	}
	// A refused call writes nothing: one look at the end finds a value any call wrote.
	all := channelText(t, b.dir)
	for _, tok := range written {
		if strings.Contains(all, tok) {
			t.Errorf("a call wrote %.20s… to the channel", tok)
		}
	}
	t.Logf("%d calls", cases)
	if cases < 100 {
		t.Fatalf("only %d cases: the schemas were not walked", cases)
	}

	// The app announced by ferry_join is the client's name from initialize.
	for _, shape := range secretShapes(1)[:2] {
		tok := tokenOf(shape)
		r.request("initialize", fmt.Sprintf(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":%q,"version":"1"}}`, shape))
		rep := r.call("ferry_join", nil)
		if strings.Contains(rep.Text, tok) || strings.Contains(channelText(t, b.dir), tok) || strings.Contains(log.String(), tok) {
			t.Errorf("ferry_join with client name %.20s…: the value reached the answer, the channel or the log (ok=%v: %.200s)", shape, !rep.IsError, rep.Text)
		}
	}
}

// channelText is every file name and content under dir, for a substring search.
func channelText(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + "\n")
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b.Write(data)
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
