// Package guard runs the secret guard (internal/secretguard) over everything a write
// would put in a channel, before the write path writes anything. It covers every
// string a caller can put into the channel (docs/format.md "Input caps and the secret
// guard"): the writer's name, an entry's ref and idem, and
// every member name and string value of its data and of every object it publishes, at
// any depth — a structured result's keys and an order schema's property names
// included. Only the positions the format fills with values ferry (or git, for a
// pointer's commit) generates are left out, by their place in the format, never by
// what the value looks like: ids, hashes, key texts, signatures, times and device ids.
// The vault file is age ciphertext (docs/format.md §11 "Vault object"): not text.
package guard

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
)

// generatedData are the positions in entry data (docs/format.md §12) that hold values
// ferry generates. A position is member names from the top, "*" for any member name;
// the value there is exempt, and so is everything under it.
var generatedData = guardPaths(
	"basis", "object", "args", "claim", "take", "result", // entry hashes, object hashes, args hashes, r- ids
	"key",                    // key text (agent.join, grant.set: checked as an ed25519 key; master.rotate)
	"bounds", "bound_hashes", // device ids → seqs and entry hashes
	"ids",                // msg.ack: full message ids
	"id",                 // secret.put: the s- id
	"platforms.*.sha256", // release.approve: the file's sha256
)

// generatedObject are the positions in objects (docs/format.md §11) that hold values
// ferry or git generates: the envelope's id, device, signature; an order's dependency
// ids and its pointers' fingerprints; a result's order id; presence times and run ids.
var generatedObject = guardPaths(
	"v", "id", "device", "sig",
	"deps", "pointers.sha256", "pointers.commit", "diff.sha256", "diff.commit",
	"order",
	"at", "runs", "running",
)

// generatedRef are the entry types whose ref is an id ferry generated (or a fixed
// word: primary, master); every other type's ref is a caller's name (an agent, a
// secret, a version) and is scanned.
var generatedRef = map[string]bool{
	fold.TypeOrderCreate: true, fold.TypeOrderOffer: true, fold.TypeOrderClaim: true, fold.TypeOrderProgress: true,
	fold.TypeOrderSubmit: true, fold.TypeOrderReview: true, fold.TypeOrderRelease: true, fold.TypeOrderExtend: true,
	fold.TypeOrderExpire: true, fold.TypeOrderFail: true, fold.TypeOrderCancel: true, fold.TypeOrderStale: true,
	fold.TypeMsgPost: true, fold.TypeMsgAck: true, fold.TypeAskRaise: true, fold.TypeAskAnswer: true,
	fold.TypePrimaryTake: true, fold.TypePrimaryRelease: true, fold.TypePrimaryBrief: true,
	fold.TypeDecisionRecord: true, fold.TypeHandinAdd: true, fold.TypeMasterRotate: true, fold.TypePolicySet: true,
}

// refNoun names what a caller-named ref is, for the refusal.
var refNoun = map[string]string{
	fold.TypeAgentJoin: "agent name", fold.TypeGrantSet: "agent name", fold.TypeGrantRevoke: "agent name",
	fold.TypeAgentRetire: "agent name", fold.TypePresenceStandby: "agent name",
	fold.TypeSecretPut: "secret name", fold.TypeReleaseApprove: "release version",
}

// fieldNoun names what an entry type's text belongs to, for the refusal.
var fieldNoun = map[string]string{
	fold.TypeMsgPost: "message", fold.TypeOrderCreate: "order", fold.TypeAskRaise: "ask", fold.TypeAskAnswer: "answer",
	fold.TypeOrderProgress: "progress", fold.TypeOrderSubmit: "result", fold.TypeOrderReview: "review",
	fold.TypeOrderRelease: "release", fold.TypeOrderFail: "fail", fold.TypeOrderCancel: "cancel",
	fold.TypeOrderExtend: "extend", fold.TypeOrderExpire: "expire", fold.TypePrimaryBrief: "brief",
	fold.TypeDecisionRecord: "decision", fold.TypeHandinAdd: "hand-in", fold.TypeAgentJoin: "join",
	fold.TypeGrantSet: "grant", fold.TypeGrantRevoke: "revoke", fold.TypeOrderOffer: "offer",
	fold.TypeOrderStale: "stale mark", fold.TypeSecretPut: "secret", fold.TypeReleaseApprove: "release",
	fold.TypeAgentRetire: "retirement", fold.TypePolicySet: "policy",
}

// memberNoun renames a member for the refusal where its JSON name reads badly.
var memberNoun = map[string]string{
	"to": "recipient", "labels": "label", "task": "task type", "app": "app name",
	"scopes": "scope", "recipients": "recipient", "pointers path": "pointer path",
	"agent": "agent name",
}

// guardPaths turns dotted positions into guardPath values.
func guardPaths(ps ...string) []guardPath {
	out := make([]guardPath, len(ps))
	for i, p := range ps {
		out[i] = strings.Split(p, ".")
	}
	return out
}

// guardPath is a position in a JSON object: member names from the top; "*" is any.
// Array elements take the position of their array.
type guardPath []string

// exempt reports whether at (member names from the top) is at or under one of ps.
func exempt(ps []guardPath, at []string) bool {
	for _, p := range ps {
		if len(at) < len(p) {
			continue
		}
		match := true
		for i, w := range p {
			if w != "*" && w != at[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// guardDraft runs the secret guard over what a write would put in the channel — the
// writer's name, the draft entry (ref, idem, data) and the objects it publishes —
// before the write path writes anything (called from Session.write). objects are the
// published objects' data, sealed ones (age ciphertext) left out.
func Draft(writer string, d *ledger.Draft, objects [][]byte) error {
	if writer != fold.MasterWriter {
		if err := secretguard.Check("agent name", writer); err != nil {
			return err
		}
	}
	noun := fieldNoun[d.Type]
	if noun == "" {
		noun = d.Type
	}
	if !generatedRef[d.Type] {
		field := refNoun[d.Type]
		if field == "" {
			field = noun + " ref"
		}
		if err := secretguard.Check(field, d.Ref); err != nil {
			return err
		}
	}
	if d.Idem != "" {
		if err := secretguard.Check("idempotency key", d.Idem); err != nil {
			return err
		}
	}
	switch d.Type {
	case fold.TypeOrderSubmit, fold.TypeOrderFail:
		// their data.note is the result's summary and the failure's reason
		var m map[string]any
		if json.Unmarshal(d.Data, &m) == nil {
			if n, ok := m["note"].(string); ok {
				if err := secretguard.Check(map[string]string{fold.TypeOrderSubmit: "result summary", fold.TypeOrderFail: "fail reason"}[d.Type], n); err != nil {
					return err
				}
			}
		}
	}
	if err := guardJSON(noun, d.Data, generatedData); err != nil {
		return err
	}
	for _, data := range objects {
		if err := guardJSON(noun, data, generatedObject); err != nil {
			return err
		}
	}
	return nil
}

// guardObject runs the secret guard over an object written outside Session.write (a
// presence file): its writer's name and every member but the generated ones.
func Object(writer, noun string, data []byte) error {
	if writer != fold.MasterWriter {
		if err := secretguard.Check("agent name", writer); err != nil {
			return err
		}
	}
	return guardJSON(noun, data, generatedObject)
}

// guardJSON scans every member name and string of the JSON object raw but those at the
// generated positions gen. Anything that is not a JSON object is scanned whole as text:
// nothing written to the channel escapes the guard by not parsing.
func guardJSON(noun string, raw []byte, gen []guardPath) error {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return secretguard.Check(noun, string(raw))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return guardValue(noun, v)
	}
	return guardMembers(noun, m, nil, gen)
}

// guardMembers scans the members of m, an object of the format's own structure at
// position at.
func guardMembers(noun string, m map[string]any, at []string, gen []guardPath) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		here := append(at[:len(at):len(at)], k)
		if exempt(gen, here) {
			continue
		}
		name := strings.Join(here, " ")
		if n, ok := memberNoun[name]; ok {
			name = n
		}
		field := noun + " " + name
		if err := secretguard.Check(field+" member name", k); err != nil {
			return err
		}
		if err := guardAt(noun, field, m[k], here, gen); err != nil {
			return err
		}
	}
	return nil
}

// guardAt scans v at position at: an object (or array of objects) that has generated
// positions below it is more of the format's structure; anything else is caller text
// or caller JSON, scanned whole.
func guardAt(noun, field string, v any, at []string, gen []guardPath) error {
	switch x := v.(type) {
	case map[string]any:
		if structural(gen, at) {
			return guardMembers(noun, x, at, gen)
		}
	case []any:
		if structural(gen, at) {
			for _, e := range x {
				if err := guardAt(noun, field, e, at, gen); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return guardValue(field, v)
}

// structural reports whether a generated position lies strictly below at.
func structural(gen []guardPath, at []string) bool {
	for _, p := range gen {
		if len(p) > len(at) && exempt([]guardPath{p[:len(at)]}, at) {
			return true
		}
	}
	return false
}

// guardValue checks a string, or every member name and string inside arrays and
// objects (constraints, a structured output, a schema) at any depth; a member holding
// a string is also checked as the assignment `name=value` it is.
func guardValue(field string, v any) error {
	switch x := v.(type) {
	case string:
		return secretguard.Check(field, x)
	case []any:
		for _, e := range x {
			if err := guardValue(field, e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := secretguard.Check(field+" member name", k); err != nil {
				return err
			}
			if s, ok := x[k].(string); ok {
				if err := secretguard.Check(field, k+"="+s); err != nil {
					return err
				}
				continue
			}
			if err := guardValue(field, x[k]); err != nil {
				return err
			}
		}
	}
	return nil
}
