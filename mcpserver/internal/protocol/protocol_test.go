package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNegotiate(t *testing.T) {
	for _, c := range []struct{ asked, want string }{
		{"2024-11-05", "2024-11-05"},
		{"2025-03-26", "2025-03-26"},
		{"2025-11-25", "2025-11-25"},
		{"", LatestVersion},
		{"1999-01-01", LatestVersion},
		{"2026-07-28", LatestVersion}, // modern: never by initialize
	} {
		if got := Negotiate(c.asked); got != c.want {
			t.Errorf("Negotiate(%q) = %q, want %q", c.asked, got, c.want)
		}
	}
}

func TestRequestEra(t *testing.T) {
	for _, c := range []struct {
		name, params string
		era          Era
		code         int // 0: no error
		msg          string
	}{
		{"no params", ``, Legacy, 0, ""},
		{"params not an object", `[1]`, Legacy, 0, ""},
		{"no _meta", `{"name":"x"}`, Legacy, 0, ""},
		{"_meta without a version", `{"_meta":{"x":1}}`, Legacy, 0, ""},
		{"modern", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`, Modern, 0, ""},
		{"unknown version", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}`, Modern, CodeUnsupportedVersion, `unsupported protocol version "1900-01-01"`},
		{"legacy version in _meta", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`, Modern, CodeUnsupportedVersion, "negotiated with initialize"},
		{"version not a string", `{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}`, Modern, CodeInvalidParams, "must be a string"},
		{"no client capabilities", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, Modern, CodeInvalidParams, "is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := RequestEra(json.RawMessage(c.params))
			if e != c.era {
				t.Errorf("era %v, want %v", e, c.era)
			}
			switch {
			case c.code == 0 && err != nil:
				t.Errorf("error %v, want none", err)
			case c.code != 0 && (err == nil || err.Code != c.code || !strings.Contains(err.Message, c.msg)):
				t.Errorf("error %v, want code %d naming %q", err, c.code, c.msg)
			}
			if c.code == CodeUnsupportedVersion && err != nil {
				var d struct {
					Supported []string `json:"supported"`
					Requested string   `json:"requested"`
				}
				if json.Unmarshal(err.Data, &d) != nil || len(d.Supported) != len(AllVersions()) || d.Supported[0] != ModernVersions[0] || d.Requested == "" {
					t.Errorf("data %s, want {supported: every version newest first, requested}", err.Data)
				}
			}
		})
	}
}

// TestModernResultKeepsBytes: the members of the result come first, byte for byte;
// the modern members follow, sorted, and one the result has already is not repeated.
func TestModernResultKeepsBytes(t *testing.T) {
	tools := `{"tools":[{"name":"a","description":"<b>","inputSchema":{"type":"object"}}]}`
	b, err := ModernResult("tools/list", json.RawMessage(tools), Implementation{Name: "ferry", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	want := tools[:len(tools)-1] + `,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"ferry","version":"1"}},"cacheScope":"public","resultType":"complete","ttlMs":3600000}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	b, err = ModernResult("tools/call", json.RawMessage(`{"_meta":{"x":1}}`), Implementation{Name: "ferry"})
	if err != nil || string(b) != `{"_meta":{"x":1},"resultType":"complete"}` {
		t.Errorf("a result with its own _meta: %s %v", b, err)
	}
	if b, err := ModernResult("ping", json.RawMessage(`{}`), Implementation{}); err != nil || !strings.HasPrefix(string(b), `{"_meta":`) {
		t.Errorf("an empty result: %s %v", b, err)
	}
	if _, err := ModernResult("ping", json.RawMessage(`[]`), Implementation{}); err == nil {
		t.Error("a result that is not an object: no error")
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		`1`: true, `-7`: true, `9007199254740993`: true, `"a"`: true, `""`: true,
		``: false, `null`: false, `1.5`: false, `1e3`: false, `{}`: false, `[1]`: false, `true`: false,
	} {
		if got := ValidID(json.RawMessage(id)); got != want {
			t.Errorf("ValidID(%s) = %v, want %v", id, got, want)
		}
	}
}

// TestInitializeResultBytes: the legacy handshake's answer, as the server encodes it.
func TestInitializeResultBytes(t *testing.T) {
	b, err := Marshal(InitializeResult{Capabilities: Capabilities(true), ProtocolVersion: "2025-06-18",
		ServerInfo: Implementation{Name: "ferry", Version: "1"}, Instructions: "<i>"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"capabilities":{"resources":{"listChanged":false,"subscribe":false},"tools":{"listChanged":false}},"instructions":"<i>","protocolVersion":"2025-06-18","serverInfo":{"name":"ferry","version":"1"}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
