package fold

import (
	"fmt"

	"github.com/ferryhq/ferry/internal/errs"
)

// Level is a writer's grant level (docs/design.md §2 level table), ordered: each level may do
// everything the levels below it may.
type Level int

// Levels, lowest first. LevelNone is an unseated or revoked writer.
const (
	LevelNone Level = iota
	LevelWorker
	LevelMember
	LevelOrchestrator
	LevelMaster
)

var levelNames = [...]string{"none", "worker", "member", "orchestrator", "master"}

func (l Level) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return fmt.Sprintf("level(%d)", int(l))
	}
	return levelNames[l]
}

// ParseLevel parses worker|member|orchestrator. "master" is not grantable.
func ParseLevel(s string) (Level, error) {
	switch s {
	case "worker":
		return LevelWorker, nil
	case "member":
		return LevelMember, nil
	case "orchestrator":
		return LevelOrchestrator, nil
	}
	return LevelNone, errs.Errorf(errs.Invalid, "use worker, member or orchestrator", "unknown level %q", s)
}

// Entry types (docs/format.md §12).
const (
	TypeAgentJoin       = "agent.join"
	TypeAgentRetire     = "agent.retire"
	TypeGrantSet        = "grant.set"
	TypeGrantRevoke     = "grant.revoke"
	TypePolicySet       = "policy.set"
	TypePresenceStandby = "presence.standby"
	TypeOrderCreate     = "order.create"
	TypeOrderOffer      = "order.offer"
	TypeOrderClaim      = "order.claim"
	TypeOrderProgress   = "order.progress"
	TypeOrderSubmit     = "order.submit"
	TypeOrderReview     = "order.review"
	TypeOrderRelease    = "order.release"
	TypeOrderExtend     = "order.extend"
	TypeOrderExpire     = "order.expire"
	TypeOrderFail       = "order.fail"
	TypeOrderCancel     = "order.cancel"
	TypeMsgPost         = "msg.post"
	TypeMsgAck          = "msg.ack"
	TypePrimaryTake     = "primary.take"
	TypePrimaryRelease  = "primary.release"
	TypePrimaryBrief    = "primary.brief"
	TypeDecisionRecord  = "decision.record"
	TypeAskRaise        = "ask.raise"
	TypeAskAnswer       = "ask.answer"
	TypeHandinAdd       = "handin.add"
	// TypeOrderStale is the author's record that a pointed file changed after dispatch
	// (ADR 0003): the order becomes pointer_stale.
	TypeOrderStale = "order.stale"
	// TypeMasterRotate moves trust from the master key that signs it to a new one
	// (rotation.go, ADR 0008).
	TypeMasterRotate = "master.rotate"
)

// minLevel is the lowest level that may write each entry type at all; role rules
// (holder, author, reviewer ≠ submitter) are checked by the thing's state machine.
var minLevel = map[string]Level{
	TypeAgentJoin:         LevelNone,   // counts before a seat, for display only
	TypeAgentSupport:      LevelWorker, // support.go: the formats the writer's build reads
	TypePresenceStandby:   LevelMember, // a worker writes hand-ins, joins and acks only (docs/format.md §13 "Levels")
	TypeMsgAck:            LevelWorker,
	TypeHandinAdd:         LevelWorker,
	TypeAgentRetire:       LevelWorker, // of itself; of others: master
	TypeMsgPost:           LevelMember,
	TypeAskRaise:          LevelMember,
	TypeOrderCreate:       LevelMember,
	TypeOrderClaim:        LevelMember,
	TypeOrderProgress:     LevelMember,
	TypeOrderSubmit:       LevelMember,
	TypeOrderRelease:      LevelMember,
	TypeOrderExtend:       LevelMember,
	TypeOrderFail:         LevelMember,
	TypeOrderExpire:       LevelMember,
	TypeOrderCancel:       LevelMember,
	TypeOrderOffer:        LevelMember, // as author; of any order: orchestrator
	TypeOrderReview:       LevelMember,
	TypeOrderStale:        LevelMember, // the author, of an unclaimed order (ADR 0003)
	TypePrimaryTake:       LevelOrchestrator,
	TypePrimaryRelease:    LevelOrchestrator,
	TypePrimaryBrief:      LevelOrchestrator,
	TypeDecisionRecord:    LevelOrchestrator,
	TypeGrantSet:          LevelMaster,
	TypeGrantRevoke:       LevelMaster,
	TypePolicySet:         LevelMaster,
	TypeAskAnswer:         LevelMaster,
	TypeReleaseApprove:    LevelMaster, // update_fold.go
	TypeMasterRotate:      LevelMaster, // rotation.go
	TypeCheckpoint:        LevelMaster, // counting.go
	TypeCheckpointDispute: LevelMember, // dispute.go
	TypeSecretPut:         LevelMember, // vault.go
}

// CheckLevel returns a denied error naming the missing level when lvl may not write typ.
// Unknown types need member level (they are kept and ignored by the fold).
func CheckLevel(writer string, lvl Level, typ string) error {
	need, ok := minLevel[typ]
	if !ok {
		need = LevelMember
	}
	if lvl >= need {
		return nil
	}
	if lvl == LevelNone {
		return errs.Errorf(errs.Denied, fmt.Sprintf("ask the owner to run `ferry grant %s --level %s`", writer, need),
			"%s is not seated in this channel; %s needs level %s", writer, typ, need)
	}
	return errs.Errorf(errs.Denied, fmt.Sprintf("ask the owner to run `ferry grant %s --level %s`", writer, need),
		"%s needs level %s; %s has level %s", typ, need, writer, lvl)
}

// MasterWriter is the writer name of the human owner (docs/design.md §2 "Ledger entry").
const MasterWriter = "master"
