package main

import (
	"github.com/execstore/execstore"
	"github.com/execstore/execstore/fsm"
)

// Body limits. A route that reads a body reads at most the largest body a
// request within the store's Limits (Store.Limits) encodes to as JSON: the
// server never refuses for its size a request the store would take, and
// refuses a larger one (413 LIMIT_EXCEEDED) before it holds it whole. The
// route table gives each route its body type, and each body type's maxBytes
// below adds up its parts:
//
//   - a JSON value the store keeps byte for byte (params, a step value, a
//     store value) counts its limit once: its bytes are the body's;
//   - a string (an ID, a key, a context key or value, a cancel reason, an
//     error's name, message and code) counts its limit escapedBytesMax (six)
//     times: an encoder may write any byte of a string as \u00XX, control
//     characters always, and <, > and & in encoders that escape HTML (Go's
//     encoding/json among them);
//   - every member of an object and element of an array counts memberBytes
//     for what surrounds its value (its name, quotes, colon, comma and
//     whitespace), and a member whose value is a number, a time or a word
//     (a status, a policy) counts memberBytes alone, which holds the widest
//     of them;
//   - the body counts bodySlackBytes more for its braces and the whitespace
//     around everything.
//
// Where a limit is counted in a command's encoded size rather than in its
// parts (an acknowledgement batch's AcknowledgeBatchBytes), its bytes count
// six times, the most any of them can take in JSON.
//
// Some parts the store does not refuse past their limit but cuts, so that
// a delivery can always end: a completed result over ValueBytes is recorded
// as a failure (INVALID_STEP_VALUE), an error's name, message and code are
// truncated, causes past ErrorCauseDepth dropped. A route reads such a part
// up to the room a string of its limit has (six times the limit), so that
// it can answer what the store records; a result counts as a string of
// ValueBytes for that reason, not once. Past that room, the body is over
// its route's limit. In a batch, whose bound is counted in encoded bytes, a
// part the store cuts takes the room the others leave.
//
// These are a bound, not an estimate: a body that a client writes compactly
// without escaping is far smaller.

const (
	// escapedBytesMax is the most bytes JSON takes to write one byte of a
	// string: \u00XX.
	escapedBytesMax = 6
	// memberBytes is what a member of an object or an element of an array
	// takes besides its value, or with it when the value is a number, a time
	// or a word: `"leaseDurationMs": 9223372036854,` is 33 bytes, an RFC 3339
	// time with nanoseconds and an offset 37 with its quotes; the rest is
	// room for indentation.
	memberBytes = 128
	// bodySlackBytes is the room a body has for its outer braces and
	// whitespace.
	bodySlackBytes = 4 << 10
)

// requestBody is a route's JSON body: a struct that decode fills, whose
// maxBytes is the largest body a request within l encodes to.
type requestBody interface {
	maxBytes(l *execstore.Limits) int64
}

// str is a member or element whose value is a string of at most n bytes.
func str(n int) int64 { return memberBytes + escapedBytesMax*int64(n) }

// raw is a member whose value is JSON of at most n bytes, kept as it is.
func raw(n int) int64 { return memberBytes + int64(n) }

// scalar is a member whose value is a number, a time or a word.
const scalar = memberBytes

// object is a member whose value is an object of these members.
func object(members ...int64) int64 {
	n := int64(memberBytes)
	for _, m := range members {
		n += m
	}
	return n
}

// lease is a lease: execution ID, token and expiry.
func lease() int64 {
	return object(str(execstore.IDBytes), scalar, scalar)
}

// errorChain is a recorded error with every cause the store keeps: each a
// name, a message and a code.
func errorChain(l *execstore.Limits) int64 {
	level := object(str(execstore.IDBytes), str(l.ErrorMessageBytes), str(execstore.IDBytes))
	return int64(l.ErrorCauseDepth+1) * level
}

// outcome is an outcome: its status, and a result or an error.
func outcome(l *execstore.Limits) int64 {
	return object(scalar, max(str(l.ValueBytes), errorChain(l)))
}

// ackMembers is what an acknowledgement in a batch takes besides the bytes
// AcknowledgeBatchBytes counts: its element, its lease's members, its
// outcome's members, and the members of every level of its error.
func ackMembers(l *execstore.Limits) int64 {
	errorLevels := int64(l.ErrorCauseDepth+1) * 4 * memberBytes
	return memberBytes + 4*memberBytes + 2*memberBytes + max(memberBytes, errorLevels)
}

// acknowledgements is the acknowledgements of a batch: at most ClaimLimit,
// of at most AcknowledgeBatchBytes encoded.
func acknowledgements(l *execstore.Limits) int64 {
	return memberBytes + int64(l.ClaimLimit)*ackMembers(l) + escapedBytesMax*int64(l.AcknowledgeBatchBytes)
}

func (admitBody) maxBytes(l *execstore.Limits) int64 {
	// Params and context share EventBytes; the context, strings, is the
	// larger in JSON.
	event := 2*memberBytes + int64(l.ContextEntries)*memberBytes + escapedBytesMax*int64(l.EventBytes)
	return bodySlackBytes + str(execstore.IDBytes) + str(execstore.IDBytes) + event + scalar + str(execstore.IDBytes) // ..., queue
}

// claimQueues is a claim's queues member: at most MaxClaimQueues names.
func claimQueues() int64 { return memberBytes + execstore.MaxClaimQueues*str(execstore.IDBytes) }

func (wakeBody) maxBytes(*execstore.Limits) int64 { return bodySlackBytes + scalar }

func (watchBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + memberBytes + int64(l.KeysPerWatch)*str(l.KeyBytes)
}

func (cancelBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + str(l.CancelReasonBytes)
}

func (claimBody) maxBytes(*execstore.Limits) int64 {
	return bodySlackBytes + 2*scalar + str(execstore.MaxRequestKeyLen) + claimQueues()
}

func (renewBody) maxBytes(l *execstore.Limits) int64 { return bodySlackBytes + lease() + scalar }

func (releaseBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + lease() + scalar + errorChain(l)
}

func (acknowledgeBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + lease() + outcome(l)
}

func (acknowledgeBatchBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + acknowledgements(l)
}

func (acknowledgeAndClaimBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + acknowledgements(l) + 2*scalar + str(execstore.MaxRequestKeyLen) + claimQueues()
}

func (checkOutcomeBody) maxBytes(l *execstore.Limits) int64 { return bodySlackBytes + outcome(l) }

func (startBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + lease() + str(l.KeyBytes) + str(execstore.IDBytes) + raw(l.EventBytes) + str(execstore.IDBytes) // ..., queue
}

func (saveStepBody) maxBytes(l *execstore.Limits) int64 {
	return bodySlackBytes + lease() + str(l.KeyBytes) + raw(l.ValueBytes)
}

func (commitBody) maxBytes(l *execstore.Limits) int64 {
	// Keys and values share CommitBytes; keys, strings, are the larger in
	// JSON, as many as the writes hold.
	keys := min(int64(l.CommitBytes), int64(l.WritesPerCommit)*int64(l.KeyBytes))
	writes := int64(l.WritesPerCommit) * 3 * memberBytes // each write's element, key and value
	return bodySlackBytes + memberBytes + writes + escapedBytesMax*keys + (int64(l.CommitBytes) - keys)
}

func (scheduleBody) maxBytes(l *execstore.Limits) int64 {
	// workflowId, params, cron, queue; intervalMs, cronOffset, start, end, catchUp.
	return bodySlackBytes + str(execstore.IDBytes) + raw(l.EventBytes) + str(fsm.MaxCronBytes) + str(execstore.IDBytes) + 5*scalar
}

func (queueBody) maxBytes(*execstore.Limits) int64 { return bodySlackBytes + 2*scalar }

func (addMemberBody) maxBytes(*execstore.Limits) int64 {
	return bodySlackBytes + 2*str(maxMemberID)
}
