// Command gwfixture is a small stdio MCP server that misbehaves on demand, for the
// gateway's tests. It is built by the tests, never shipped.
//
// Flags change the whole process: -slow-start sleeps before answering initialize,
// -garbage-start prints a non-JSON line instead, -pages splits tools/list into pages
// of one tool, -pidfile appends the pid to a file, -proto sets the protocolVersion
// initialize answers, -grandchild starts a sleeping copy of itself (its pid appended
// to -pidfile too) before answering anything, -badnames adds to tools/list a tool named
// "", one with no name and a second "echo", and gives echo a description with a
// terminal escape and a NUL. Tools misbehave per call:
//
//	echo       returns its arguments as text
//	env        returns the sorted names of its environment variables
//	slow       never answers
//	hangup     closes its stdout and sleeps
//	crash      writes a line on stderr and exits 3 without answering
//	garbage    prints a non-JSON line on stdout instead of an answer
//	rpc_error  answers a JSON-RPC error -32602 "bad widget"
//	fail       answers a result with isError: "the widget is broken"
//
// Unlisted tools answer JSON that is not I-JSON (RFC 7493), the text "evil" where a
// reader that keeps the last of two members would look:
//
//	dupkey     a result that names "content" twice
//	dupid      a response that names "id" twice (both the call's id)
//	badutf8    a result whose text has a byte that is not UTF-8
//	surrogate  a result whose text is a lone surrogate escape
//	badnotify  a notification that names "level" twice, then echo's answer
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

var tools = []string{"echo", "env", "slow", "hangup", "crash", "garbage", "rpc_error", "fail"}

func main() {
	slowStart := flag.Duration("slow-start", 0, "sleep this long before answering initialize")
	garbageStart := flag.Bool("garbage-start", false, "answer initialize with a non-JSON line")
	pages := flag.Bool("pages", false, "one tool per tools/list page")
	proto := flag.String("proto", "2025-06-18", "the protocolVersion initialize answers")
	pidfile := flag.String("pidfile", "", "append this process's pid and a newline to this file at start")
	grandchild := flag.Bool("grandchild", false, "start a copy of this program that only sleeps (and writes its pid to -pidfile)")
	sleep := flag.Bool("sleep", false, "only sleep for two minutes")
	badNames := flag.Bool("badnames", false, "list tools with empty, missing and repeated names, and an escape in echo's description")
	flag.Parse()
	if *pidfile != "" {
		f, err := os.OpenFile(*pidfile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
	}
	if *sleep {
		time.Sleep(2 * time.Minute)
		return
	}
	if *grandchild {
		// Not waited for: it must die with this process's group when the client kills.
		cmd := exec.Command(os.Args[0], "-sleep", "-pidfile", *pidfile)
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "gwfixture:", err)
			os.Exit(1)
		}
		for { // the grandchild's pid is in the file before initialize is answered
			b, _ := os.ReadFile(*pidfile)
			if strings.Count(string(b), "\n") >= 2 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	answer := func(id json.RawMessage, result any) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	raw := func(format string, args ...any) { // one line exactly as given
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	text := func(s string, isError bool) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": isError}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor    string          `json:"cursor"`
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			fmt.Fprintln(os.Stderr, "gwfixture: not JSON")
			os.Exit(1)
		}
		switch m.Method {
		case "initialize":
			time.Sleep(*slowStart)
			if *garbageStart {
				fmt.Fprintln(out, "starting up, please wait")
				out.Flush()
				continue
			}
			answer(m.ID, map[string]any{"protocolVersion": *proto, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "gwfixture", "version": "1"}})
		case "tools/list":
			list := []any{}
			next := ""
			for i, t := range tools {
				if *pages && fmt.Sprint(i) != strings.TrimPrefix(m.Params.Cursor, "p") && !(m.Params.Cursor == "" && i == 0) {
					continue
				}
				list = append(list, map[string]any{"name": t, "description": "The " + t + " tool.",
					"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}})
				if *pages && i+1 < len(tools) {
					next = fmt.Sprintf("p%d", i+1)
				}
			}
			if *badNames {
				list[0].(map[string]any)["description"] = "The \x1b[31mecho\x1b[0m tool.\x00"
				list = append(list, map[string]any{"name": "", "inputSchema": map[string]any{"type": "object"}},
					map[string]any{"description": "no name", "inputSchema": map[string]any{"type": "object"}},
					map[string]any{"name": "echo", "description": "again", "inputSchema": map[string]any{"type": "object"}})
			}
			r := map[string]any{"tools": list}
			if next != "" {
				r["nextCursor"] = next
			}
			answer(m.ID, r)
		case "tools/call":
			switch m.Params.Name {
			case "echo":
				answer(m.ID, text(string(m.Params.Arguments), false))
			case "env":
				var names []string
				for _, e := range os.Environ() {
					n, _, _ := strings.Cut(e, "=")
					names = append(names, n)
				}
				sort.Strings(names)
				answer(m.ID, text(strings.Join(names, ","), false))
			case "slow":
			case "hangup":
				os.Stdout.Close()
				time.Sleep(2 * time.Minute)
			case "crash":
				fmt.Fprintln(os.Stderr, "gwfixture: crashing on purpose")
				os.Exit(3)
			case "garbage":
				fmt.Fprintln(out, "DEBUG widget count = 3")
				out.Flush()
			case "rpc_error":
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "bad widget"}})
			case "fail":
				answer(m.ID, text("the widget is broken", true))
			case "dupkey":
				raw(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"benign"}],"content":[{"type":"text","text":"evil"}]}}`, m.ID)
			case "dupid":
				raw(`{"jsonrpc":"2.0","id":%s,"id":%[1]s,"result":{"content":[{"type":"text","text":"evil"}]}}`, m.ID)
			case "badutf8":
				raw("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"evil \xff\"}]}}", m.ID)
			case "surrogate":
				raw(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"evil \ud800"}]}}`, m.ID)
			case "badnotify":
				raw(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","level":"evil","data":"x"}}`)
				answer(m.ID, text(string(m.Params.Arguments), false))
			default:
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "unknown tool " + m.Params.Name}})
			}
		default:
			if len(m.ID) > 0 {
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			}
		}
	}
}
