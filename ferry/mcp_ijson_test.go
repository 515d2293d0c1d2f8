package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mcpIJSONCases are messages that are not I-JSON (RFC 7493), each a ferry_talk post
// that would write "evil-N" to the channel if it were run. %s is where the id member
// goes ("" for the notification form; a line without it carries its ids). wantID is the id the refusal carries: "echo"
// for the request's own, "null" for none.
var mcpIJSONCases = []struct {
	name   string
	line   string
	code   int
	wantID string
	notify bool // also sent as a notification, which gets no answer
}{
	{"duplicate top-level member", `{"jsonrpc":"2.0",%s"method":"tools/call","params":{"name":"ferry_catchup","arguments":{}},"params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"evil-1"}}}`, -32600, "echo", true},
	{"duplicate nested member", `{"jsonrpc":"2.0",%s"method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"benign","text":"evil-2"}}}`, -32600, "echo", true},
	{"duplicate id", `{"jsonrpc":"2.0","id":"d1","id":"d2","method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"evil-3"}}}`, -32600, "null", false},
	{"invalid UTF-8 byte", "{\"jsonrpc\":\"2.0\",%s\"method\":\"tools/call\",\"params\":{\"name\":\"ferry_talk\",\"arguments\":{\"action\":\"post\",\"to\":\"master\",\"text\":\"evil-4 \xff\"}}}", -32700, "null", true},
	{"lone high surrogate", `{"jsonrpc":"2.0",%s"method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"evil-5 \ud800"}}}`, -32700, "null", true},
	{"lone low surrogate", `{"jsonrpc":"2.0",%s"method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"evil-6 \udc00"}}}`, -32700, "null", true},
}

// mcpRefusesNonIJSON drives a real `ferry mcp serve` with raw lines that break I-JSON,
// as requests and as notifications, then one good post: every request is refused with
// the code and id of the rule (docs/mcp.md "Strict JSON"), no notification is answered,
// a batch is refused element by element, and nothing of the bad lines reaches the
// channel while the good post does.
func mcpRefusesNonIJSON(t *testing.T, bin string) {
	m := newMCPMachine(t, bin)
	ch := m.channel("acme", "bob")
	cmd := m.serve("bob", "acme")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	lines := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	type want struct {
		id   string // the response's id as JSON
		code int
	}
	var wants []want // in the order the refusals are written (each as its line is read)
	notifications := 0
	for i, c := range mcpIJSONCases {
		id := fmt.Sprintf(`"r%d"`, i)
		if !strings.Contains(c.line, "%s") { // the ids are in the line already
			lines = append(lines, c.line)
		} else {
			lines = append(lines, fmt.Sprintf(c.line, `"id":`+id+`,`))
		}
		w := want{id: id, code: c.code}
		if c.wantID == "null" {
			w.id = "null"
		}
		wants = append(wants, w)
		if c.notify {
			lines = append(lines, fmt.Sprintf(c.line, ""))
			notifications++
		}
	}
	// A batch (protocol 2025-03-26 has them): the good element runs, the bad one is refused.
	lines = append(lines, `[{"jsonrpc":"2.0","id":"b1","method":"ping"},{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"ferry_talk","arguments":{"text":"benign","action":"post","to":"master","text":"evil-7"}}}]`)
	// A batch whose encoding is broken is not read at all.
	lines = append(lines, "[{\"jsonrpc\":\"2.0\",\"id\":\"b3\",\"method\":\"tools/call\",\"params\":{\"name\":\"ferry_talk\",\"arguments\":{\"action\":\"post\",\"to\":\"master\",\"text\":\"evil-8 \xc3\"}}}]")
	lines = append(lines, `{"jsonrpc":"2.0","id":"good","method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"good-marker"}}}`)
	var in bytes.Buffer
	for _, l := range lines {
		in.WriteString(l + "\n")
	}
	if _, err := stdin.Write(in.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the server exited with %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(mcpDeadline):
		t.Fatalf("the server did not exit within %v of EOF\nstderr:\n%s", mcpDeadline, stderr.String())
	}

	type resp struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var got []resp   // single responses, in order
	var batch []resp // the one batch answer
	batches := 0
	for _, l := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		if strings.HasPrefix(l, "[") {
			batches++
			if err := json.Unmarshal([]byte(l), &batch); err != nil {
				t.Fatalf("batch answer %q: %v", l, err)
			}
			continue
		}
		var r resp
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		got = append(got, r)
	}
	out := stdout.String()
	// initialize, one refusal per request case, the broken batch's one -32700, the good
	// post; no answer to any notification.
	if len(got) != 1+len(wants)+2 || batches != 1 {
		t.Fatalf("%d single responses and %d batch answers, want %d and 1 (no answer to the %d notifications); stdout:\n%s",
			len(got), batches, 1+len(wants)+2, notifications, out)
	}
	for i, w := range wants {
		r := got[1+i]
		if string(r.ID) != w.id || r.Error == nil || r.Error.Code != w.code {
			t.Errorf("%s: answered %s, want code %d with id %s", mcpIJSONCases[i].name, mustJSON(r), w.code, w.id)
		}
	}
	if r := got[1+len(wants)]; string(r.ID) != "null" || r.Error == nil || r.Error.Code != -32700 {
		t.Errorf("the batch with a bad byte: answered %s, want one -32700 with id null", mustJSON(r))
	}
	if r := got[len(got)-1]; string(r.ID) != `"good"` || r.Error != nil || bytes.Contains(r.Result, []byte(`"isError":true`)) {
		t.Errorf("the good post: answered %s, want a result", mustJSON(r))
	}
	if len(batch) != 2 || string(batch[0].ID) != `"b1"` || batch[0].Error != nil ||
		string(batch[1].ID) != `"b2"` || batch[1].Error == nil || batch[1].Error.Code != -32600 {
		t.Errorf("the batch answered %s, want b1's result and b2's -32600", mustJSON(batch))
	}
	if n := strings.Count(stderr.String(), "ignoring a notification that is not I-JSON"); n != notifications {
		t.Errorf("stderr names %d dropped notifications, want %d:\n%s", n, notifications, stderr.String())
	}

	// Nothing of a bad line reached the channel; the good post did.
	good := 0
	err = filepath.WalkDir(ch, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("evil-")) {
			t.Errorf("%s carries a refused message:\n%s", p, b)
		}
		if bytes.Contains(b, []byte("good-marker")) {
			good++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if good == 0 {
		t.Errorf("the good post is in no file of the channel")
	}
	msgs, _ := os.ReadDir(filepath.Join(ch, "messages"))
	if len(msgs) != 1 {
		t.Errorf("%d message files, want the good post's alone", len(msgs))
	}
}

// mustJSON is v as JSON, for messages.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
