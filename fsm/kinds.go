package fsm

import "encoding/binary"

// The table of command kinds. Everything the store must know of a kind is a
// slot of the kind's row: its name, the codec version it first appears in,
// how it is encoded, decoded, sized and bounded, its structural check, its
// apply (which is also its precheck), the batch view's prediction of what it
// does, and what its not-found and limit answers mean. A new kind is one row
// and the functions it names; TestEveryKindFillsEverySlot names any slot a
// row leaves empty, and docs/design/command-kinds.md is the recipe.

// kindDef is one row of the table.
type kindDef struct {
	name string
	// since is the codec version the kind first appears in: a command of
	// the kind encoded in an older version is refused when decoded.
	since byte
	// encode appends the kind's fields in the given codec version, leaving
	// out what the version does not hold; decode reads what encode wrote.
	encode func(dst []byte, c *Command, version byte) []byte
	decode func(d *Decoder, c *Command, version byte)
	// size is the encoded length of the kind's fields (see EncodedLen);
	// bound, the largest that the store's limits allow (see Bounds).
	size  func(c *Command) int
	bound func(b *Bounds) int
	// check is the kind's part of Command.Check: "" or what is wrong.
	check func(c *Command) string
	// apply applies the command at its effective time now, or with dry set
	// only decides whether it would change the state (Apply, Precheck).
	apply func(s *State, c *Command, now int64, dry bool) Result
	// settles and note are the batch view's prediction (BatchView).
	settles func(v *BatchView, c *Command) bool
	note    func(v *BatchView, c *Command, st *State)
	// notFound and limit say what CodeNotFound and CodeLimitExceeded
	// answered to the kind mean.
	notFound NotFound
	limit    LimitKind
}

// NotFound says what a kind's CodeNotFound means.
type NotFound uint8

const (
	_ NotFound = iota // 0: unset, which TestEveryKindFillsEverySlot refuses
	// NotFoundExecution: no execution has the command's ID.
	NotFoundExecution
	// NotFoundLease: a fenced command's execution does not exist, so its
	// lease is not current.
	NotFoundLease
	// NotFoundSchedule: no schedule has the command's ID.
	NotFoundSchedule
	// NotFoundNever: the kind never answers CodeNotFound.
	NotFoundNever
)

// LimitKind says which count a kind's CodeLimitExceeded reached.
type LimitKind uint8

const (
	_ LimitKind = iota // 0: unset, which TestEveryKindFillsEverySlot refuses
	// LimitSteps: the execution's MaxStepsPerExecution.
	LimitSteps
	// LimitWatches: the execution's MaxWatchesPerExecution.
	LimitWatches
	// LimitSchedules: the store's limit of schedules, the command's Limit.
	LimitSchedules
	// LimitQueueSettings: the limit of queues with settings, the command's
	// Limit.
	LimitQueueSettings
	// LimitNever: the kind never answers CodeLimitExceeded.
	LimitNever
)

// kinds is the table, indexed by Kind; a zero row is no kind.
var kinds = [...]kindDef{
	KindAdmit: {
		name: "admit", since: 1,
		encode: encodeAdmit, decode: decodeAdmit, size: sizeAdmit, bound: boundAdmit, check: checkAdmit,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.admit(c, now, dry) },
		settles: (*BatchView).settlesAdmit, note: (*BatchView).noteAdmit,
		notFound: NotFoundNever, limit: LimitNever,
	},
	KindWake: {
		name: "wake", since: 1,
		encode: encodeWake, decode: decodeWake, size: sizeWake, bound: boundWake, check: checkWake,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.wake(c, now, dry) },
		settles: (*BatchView).settlesWake, note: (*BatchView).noteWake,
		notFound: NotFoundExecution, limit: LimitNever,
	},
	KindClaim: {
		name: "claim", since: 1,
		encode: encodeClaim, decode: decodeClaim, size: sizeClaim, bound: boundClaim, check: checkClaim,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.claim(c, now, dry) },
		settles: (*BatchView).settlesClaim, note: (*BatchView).noteClaim,
		notFound: NotFoundNever, limit: LimitNever,
	},
	KindRenew: {
		name: "renew", since: 1,
		encode: encodeRenewRelease, decode: decodeRenewRelease, size: sizeRenew, bound: boundRenew, check: checkRenew,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.renew(c, now, dry) },
		settles: (*BatchView).settlesFenced, note: noteNothing,
		notFound: NotFoundLease, limit: LimitNever,
	},
	KindRelease: {
		name: "release", since: 1,
		encode: encodeRenewRelease, decode: decodeRenewRelease, size: sizeRelease, bound: boundRelease, check: checkRelease,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.release(c, now, dry) },
		settles: (*BatchView).settlesFenced, note: (*BatchView).noteEndsLease,
		notFound: NotFoundLease, limit: LimitNever,
	},
	KindAcknowledge: {
		name: "acknowledge", since: 1,
		encode: encodeAcknowledge, decode: decodeAcknowledge, size: sizeAcknowledge, bound: boundAcknowledge, check: checkAcknowledge,
		apply: func(s *State, c *Command, now int64, dry bool) Result {
			return s.acknowledge(&Ack{ExecutionID: c.ExecutionID, Token: c.Token, Outcome: c.Outcome}, now, dry)
		},
		settles: (*BatchView).settlesFenced, note: (*BatchView).noteEndsLease,
		notFound: NotFoundLease, limit: LimitNever,
	},
	KindSaveStep: {
		name: "save-step", since: 1,
		encode: encodeSaveStep, decode: decodeSaveStep, size: sizeSaveStep, bound: boundSaveStep, check: checkSaveStep,
		apply:   func(s *State, c *Command, _ int64, dry bool) Result { return s.saveStep(c, dry) },
		settles: (*BatchView).settlesFenced, note: noteNothing,
		notFound: NotFoundLease, limit: LimitSteps,
	},
	KindStart: {
		name: "start", since: 1,
		encode: encodeStart, decode: decodeStart, size: sizeStart, bound: boundStart, check: checkStart,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.start(c, now, dry) },
		settles: (*BatchView).settlesStart, note: (*BatchView).noteStart,
		notFound: NotFoundLease, limit: LimitSteps,
	},
	KindCommit: {
		name: "commit", since: 1,
		encode: encodeCommit, decode: decodeCommit, size: sizeCommit, bound: boundCommit, check: checkCommit,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.commit(c, now, dry) },
		settles: settlesNever, note: noteNothing,
		notFound: NotFoundNever, limit: LimitNever,
	},
	KindWatch: {
		name: "watch", since: 1,
		encode: encodeWatch, decode: decodeWatch, size: sizeWatch, bound: boundWatch, check: checkWatch,
		apply:   func(s *State, c *Command, _ int64, dry bool) Result { return s.watch(c, dry) },
		settles: (*BatchView).settlesWatch, note: (*BatchView).noteWatch,
		notFound: NotFoundExecution, limit: LimitWatches,
	},
	KindRetire: {
		name: "retire", since: 1,
		encode: encodeRetire, decode: decodeRetire, size: sizeRetire, bound: boundRetire, check: checkRetire,
		apply:   func(s *State, c *Command, _ int64, dry bool) Result { return s.retire(c, dry) },
		settles: settlesNever, note: noteNothing,
		notFound: NotFoundNever, limit: LimitNever,
	},
	KindAcknowledgeBatch: {
		name: "acknowledge-batch", since: 1,
		encode: encodeAcknowledgeBatch, decode: decodeAcknowledgeBatch, size: sizeAcknowledgeBatch,
		bound: boundAcknowledgeBatch, check: checkAcknowledgeBatch,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.acknowledgeBatch(c.Acks, now, dry) },
		settles: (*BatchView).settlesAcknowledgeBatch, note: (*BatchView).noteAcknowledgeBatch,
		notFound: NotFoundLease, limit: LimitNever,
	},
	KindCancel: {
		name: "cancel", since: 2,
		encode: encodeCancel, decode: decodeCancel, size: sizeCancel, bound: boundCancel, check: checkCancel,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.cancel(c, now, dry) },
		settles: (*BatchView).settlesCancel, note: (*BatchView).noteCancel,
		notFound: NotFoundExecution, limit: LimitNever,
	},
	KindForget: {
		name: "forget", since: 4,
		encode: encodeForget, decode: decodeForget, size: sizeForget, bound: boundForget, check: checkForget,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.forget(c, now, dry) },
		settles: settlesNever, note: noteNothing,
		notFound: NotFoundNever, limit: LimitNever,
	},

	// Schedules (schedule.go, schedule_codec.go). Their fields are the same in
	// every codec version, so version 1 decodes them too.
	KindPutSchedule: {
		name: "put-schedule", since: 1,
		encode: encodePutSchedule, decode: decodePutSchedule, size: sizePutSchedule, bound: boundPutSchedule,
		check:   checkPutSchedule,
		apply:   func(s *State, c *Command, _ int64, dry bool) Result { return s.putSchedule(c, dry) },
		settles: (*BatchView).settlesPutSchedule, note: (*BatchView).notePutSchedule,
		notFound: NotFoundNever, limit: LimitSchedules,
	},
	KindPutQueue: {
		name: "put-queue", since: 6,
		encode: encodePutQueue, decode: decodePutQueue, size: sizePutQueue, bound: boundPutQueue, check: checkPutQueue,
		apply:   func(s *State, c *Command, _ int64, dry bool) Result { return s.putQueue(c, dry) },
		settles: (*BatchView).settlesPutQueue, note: (*BatchView).notePutQueue,
		notFound: NotFoundNever, limit: LimitQueueSettings,
	},
	KindDeleteQueue: {
		name: "delete-queue", since: 6,
		encode: encodeDeleteQueue, decode: decodeDeleteQueue, size: sizeDeleteQueue, bound: boundDeleteQueue, check: checkDeleteQueue,
		apply:   func(s *State, c *Command, _ int64, dry bool) Result { return s.deleteQueue(c, dry) },
		settles: (*BatchView).settlesDeleteQueue, note: (*BatchView).noteDeleteQueue,
		notFound: NotFoundNever, limit: LimitNever,
	},
	KindExpireDeadlines: {
		name: "expire-deadlines", since: 9,
		encode: encodeExpireDeadlines, decode: decodeExpireDeadlines, size: sizeExpireDeadlines,
		bound: boundExpireDeadlines, check: checkExpireDeadlines,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.expireDeadlines(c, now, dry) },
		settles: settlesNever, note: noteNothing,
		notFound: NotFoundNever, limit: LimitNever,
	},
	KindDeleteSchedule: {
		name: "delete-schedule", since: 1,
		encode: encodeDeleteSchedule, decode: decodeDeleteSchedule, size: sizeDeleteSchedule,
		bound: boundDeleteSchedule, check: checkDeleteSchedule,
		apply:   func(s *State, c *Command, _ int64, dry bool) Result { return s.deleteSchedule(c, dry) },
		settles: (*BatchView).settlesDeleteSchedule, note: (*BatchView).noteDeleteSchedule,
		notFound: NotFoundSchedule, limit: LimitNever,
	},
	KindFireSchedules: {
		name: "fire-schedules", since: 1,
		encode: encodeFireSchedules, decode: decodeFireSchedules, size: sizeFireSchedules,
		bound: boundFireSchedules, check: checkFireSchedules,
		apply:   func(s *State, c *Command, now int64, dry bool) Result { return s.fireSchedules(c, now, dry) },
		settles: settlesNever, note: noteNothing,
		notFound: NotFoundNever, limit: LimitNever,
	},
}

// kindOf returns k's row, or nil for a number that names no kind.
func kindOf(k Kind) *kindDef {
	if int(k) < len(kinds) && kinds[k].name != "" {
		return &kinds[k]
	}
	return nil
}

// Kinds returns every kind, in number order.
func Kinds() []Kind {
	var out []Kind
	for k := range kinds {
		if kinds[k].name != "" {
			out = append(out, Kind(k))
		}
	}
	return out
}

// NotFoundOf says what CodeNotFound means for a command of kind k.
func NotFoundOf(k Kind) NotFound {
	if d := kindOf(k); d != nil {
		return d.notFound
	}
	return NotFoundNever
}

// LimitOf says which count CodeLimitExceeded reached for a command of kind
// k.
func LimitOf(k Kind) LimitKind {
	if d := kindOf(k); d != nil {
		return d.limit
	}
	return LimitNever
}

// ---- Bounds ---------------------------------------------------------------------

// Bounds are the sizes the store's limits allow, from which each kind's
// bound computes the largest encoded command of the kind (CommandBound).
// Every term of a bound follows the kind's encoding: a string is its length
// and a varint of it, an integer at most a varint's widest.
type Bounds struct {
	ID              int // an execution, workflow or generated ID
	Event           int // an admission's params and context together
	ContextEntries  int
	Value           int // a completed result, a step value
	Key             int // a step key, a key-value store key
	WritesPerCommit int
	Commit          int // one commit's keys and values together
	KeysPerWatch    int
	ErrorMessage    int // a recorded error's message, its truncation mark included
	ErrorCauseDepth int
	CancelReason    int
}

const (
	boundHead = 2 + binary.MaxVarintLen64 // version, kind, time
	boundNum  = binary.MaxVarintLen64     // any integer
)

func (b *Bounds) id() int       { return boundNum + b.ID }
func (b *Bounds) str(n int) int { return boundNum + n }
func (b *Bounds) chain() int {
	return boundNum + (b.ErrorCauseDepth+1)*(b.str(b.ID)+b.str(b.ErrorMessage)+b.str(b.ID))
}
func (b *Bounds) ack() int        { return b.id() + boundNum + 1 + max(b.str(b.Value), b.chain()) }
func (b *Bounds) scheduleID() int { return b.id() }

// CommandBound is the largest encoded size b allows a command of kind k.
func CommandBound(b *Bounds, k Kind) int {
	d := kindOf(k)
	if d == nil {
		panic("fsm: no size bound for " + k.String())
	}
	return boundHead + d.bound(b)
}

// LargestCommand returns the kind whose commands b lets grow largest, and
// that size.
func LargestCommand(b *Bounds) (Kind, int) {
	var kind Kind
	largest := 0
	for _, k := range Kinds() {
		if n := CommandBound(b, k); n > largest {
			kind, largest = k, n
		}
	}
	return kind, largest
}

// AckCommandBytes bounds the encoded acknowledgements of one
// acknowledge-batch command the store makes (a lone acknowledgement may pass
// it, but is then an acknowledge command).
const AckCommandBytes = 1 << 20

// ---- Admit ----------------------------------------------------------------------

//	admit  id:str generated:1B workflow:str params:opt context:(count+1, then key:str value:str...)
//	       max-attempts:uv (version 2)

func encodeAdmit(dst []byte, c *Command, version byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	dst = append(dst, boolByte(c.Generated))
	dst = appendStr(dst, c.WorkflowID)
	dst = appendOpt(dst, c.Params, c.HasParams)
	dst = appendContext(dst, c.Context)
	if version >= 2 {
		dst = binary.AppendUvarint(dst, uint64(c.MaxAttempts))
	}
	if version >= 5 {
		dst = appendStr(dst, c.Queue)
	}
	if version >= 8 {
		dst = append(dst, byte(c.Priority))
	}
	if version >= 9 {
		dst = binary.AppendUvarint(dst, uint64(c.Deadline))
	}
	if version >= 10 {
		dst = appendStr(dst, c.ConcurrencyKey)
	}
	return dst
}

func decodeAdmit(d *Decoder, c *Command, version byte) {
	c.ExecutionID = d.Str()
	c.Generated = d.Bool()
	c.WorkflowID = d.Str()
	c.Params, c.HasParams = d.Opt()
	c.Context = d.context()
	if version >= 2 {
		c.MaxAttempts = int(d.Int())
	}
	if version >= 5 {
		c.Queue = d.Str()
	}
	if version >= 8 {
		c.Priority = int(d.Byte())
	}
	if version >= 9 {
		c.Deadline = d.Int()
	}
	if version >= 10 {
		c.ConcurrencyKey = d.Str()
	}
}

func sizeAdmit(c *Command) int {
	return strLen(c.ExecutionID) + 1 + strLen(c.WorkflowID) + optLen(c.Params, c.HasParams) + contextLen(c.Context) +
		uvarintLen(uint64(c.MaxAttempts)) + strLen(c.Queue) + 1 + uvarintLen(uint64(c.Deadline)) + strLen(c.ConcurrencyKey)
}

// boundAdmit: params and context share Event; each context entry adds two
// lengths; the attempt bound, then the queue, the priority and the
// deadline, and the concurrency key, last.
func boundAdmit(b *Bounds) int {
	return b.id() + 1 + b.id() + boundNum + boundNum + b.Event + b.ContextEntries*2*boundNum + boundNum + b.id() + 1 + boundNum +
		boundNum + MaxConcurrencyKeyBytes
}

func checkAdmit(c *Command) string {
	switch {
	case c.ExecutionID == "" || c.WorkflowID == "":
		return "empty execution or workflow ID"
	case c.MaxAttempts < 0 || c.MaxAttempts > MaxAttempts:
		return "attempt bound outside 0.." + itoa(MaxAttempts)
	case c.Context != nil && !sortedUniqueKV(*c.Context):
		return "context keys not sorted and unique"
	case !validPriority(c.Priority):
		return "priority outside " + itoa(PriorityFirst) + ".." + itoa(PriorityLast)
	case c.Deadline < 0:
		return "negative deadline"
	case !validConcurrencyKey(c.ConcurrencyKey):
		return "concurrency key not 0 to " + itoa(MaxConcurrencyKeyBytes) + " bytes of UTF-8"
	}
	return ""
}

// ---- Wake -----------------------------------------------------------------------

//	wake  id:str at:uv

func encodeWake(dst []byte, c *Command, _ byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	return binary.AppendUvarint(dst, uint64(c.At))
}

func decodeWake(d *Decoder, c *Command, _ byte) {
	c.ExecutionID = d.Str()
	c.At = d.Int()
}

func sizeWake(c *Command) int { return strLen(c.ExecutionID) + uvarintLen(uint64(c.At)) }

func boundWake(b *Bounds) int { return b.id() + boundNum }

func checkWake(c *Command) string {
	if c.ExecutionID == "" || c.At <= 0 {
		return "empty execution ID or non-positive time"
	}
	return ""
}

// ---- Claim ----------------------------------------------------------------------

//	claim  limit:uv duration:uv key:str (version 3; empty: none)
//	       queues:(count:uv, name:str...) (version 5; none: every queue)

func encodeClaim(dst []byte, c *Command, version byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(c.Limit))
	dst = binary.AppendUvarint(dst, uint64(c.Duration))
	if version >= 3 {
		dst = appendStr(dst, c.RequestKey)
	}
	if version >= 5 {
		dst = binary.AppendUvarint(dst, uint64(len(c.Queues)))
		for _, q := range c.Queues {
			dst = appendStr(dst, q)
		}
	}
	return dst
}

func decodeClaim(d *Decoder, c *Command, version byte) {
	c.Limit = int(d.Int())
	c.Duration = d.Int()
	if version >= 3 {
		c.RequestKey = d.Str()
	}
	if version >= 5 {
		if n := d.Count(1); n > 0 {
			c.Queues = make([]string, n)
			for i := range c.Queues {
				c.Queues[i] = d.Str()
			}
		}
	}
}

func sizeClaim(c *Command) int {
	n := uvarintLen(uint64(c.Limit)) + uvarintLen(uint64(c.Duration)) + strLen(c.RequestKey) + uvarintLen(uint64(len(c.Queues)))
	for _, q := range c.Queues {
		n += strLen(q)
	}
	return n
}

func boundClaim(b *Bounds) int {
	return 2*boundNum + boundNum + MaxRequestKeyLen + boundNum + MaxClaimQueues*b.id()
}

func checkClaim(c *Command) string {
	switch {
	case c.Limit <= 0 || c.Duration <= 0:
		return "non-positive limit or duration"
	case len(c.RequestKey) > MaxRequestKeyLen:
		return "request key longer than " + itoa(MaxRequestKeyLen) + " bytes"
	case len(c.Queues) > MaxClaimQueues:
		return "more than " + itoa(MaxClaimQueues) + " queues"
	}
	for i, q := range c.Queues {
		if q == "" || (i > 0 && q <= c.Queues[i-1]) {
			return "queue names empty, or not sorted and unique"
		}
	}
	return ""
}

// ---- Renew and release --------------------------------------------------------------

//	renew    id:str token:uv duration:uv
//	release  id:str token:uv delay:uv cause:error (version 2; depth 0: none)

func encodeRenewRelease(dst []byte, c *Command, version byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	dst = binary.AppendUvarint(dst, c.Token)
	dst = binary.AppendUvarint(dst, uint64(c.Duration))
	if c.Kind == KindRelease && version >= 2 {
		dst = AppendErrorInfo(dst, c.Cause)
	}
	return dst
}

func decodeRenewRelease(d *Decoder, c *Command, version byte) {
	c.ExecutionID = d.Str()
	c.Token = d.Uvarint()
	c.Duration = d.Int()
	if c.Kind == KindRelease && version >= 2 {
		c.Cause = readErrorInfo(d)
	}
}

func sizeRenew(c *Command) int {
	return strLen(c.ExecutionID) + uvarintLen(c.Token) + uvarintLen(uint64(c.Duration))
}

func sizeRelease(c *Command) int { return sizeRenew(c) + ErrorInfoLen(c.Cause) }

func boundRenew(b *Bounds) int { return b.id() + 2*boundNum }

func boundRelease(b *Bounds) int { return b.id() + 2*boundNum + b.chain() }

func checkRenew(c *Command) string {
	if c.ExecutionID == "" || c.Duration <= 0 {
		return "empty execution ID or non-positive duration"
	}
	return ""
}

func checkRelease(c *Command) string {
	switch {
	case c.ExecutionID == "" || c.Duration < 0:
		return "empty execution ID or negative delay"
	case chainDepth(c.Cause) > MaxErrorDepth:
		return "cause chain deeper than " + itoa(MaxErrorDepth)
	}
	return ""
}

// ---- Acknowledge ----------------------------------------------------------------

//	acknowledge  id:str token:uv status:1B (completed: result:opt | failed, cancelled: error)
//	             error = depth:uv, then per level name:str message:str code:str

func encodeAcknowledge(dst []byte, c *Command, _ byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	dst = binary.AppendUvarint(dst, c.Token)
	return appendOutcome(dst, &c.Outcome)
}

func decodeAcknowledge(d *Decoder, c *Command, _ byte) {
	c.ExecutionID = d.Str()
	c.Token = d.Uvarint()
	d.outcome(&c.Outcome)
}

func sizeAcknowledge(c *Command) int { return AckLen(c.ExecutionID, c.Token, &c.Outcome) }

func boundAcknowledge(b *Bounds) int { return b.ack() }

func checkAcknowledge(c *Command) string { return checkAck(c.ExecutionID, &c.Outcome) }

// ---- Acknowledge-batch ------------------------------------------------------------

//	acknowledge-batch  count:uv, then per acknowledgement id:str token:uv status:1B (as acknowledge)

func encodeAcknowledgeBatch(dst []byte, c *Command, _ byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(c.Acks)))
	for i := range c.Acks {
		a := &c.Acks[i]
		dst = appendStr(dst, a.ExecutionID)
		dst = binary.AppendUvarint(dst, a.Token)
		dst = appendOutcome(dst, &a.Outcome)
	}
	return dst
}

func decodeAcknowledgeBatch(d *Decoder, c *Command, _ byte) {
	n := d.Count(3) // at least an ID length, a token and a status
	if n > MaxAcksPerCommand {
		d.refuse("acknowledge-batch of " + itoa(uint64(n)) + " acknowledgements")
		return
	}
	if n > 0 {
		c.Acks = make([]Ack, n)
	}
	for i := range c.Acks {
		a := &c.Acks[i]
		a.ExecutionID = d.Str()
		a.Token = d.Uvarint()
		d.outcome(&a.Outcome)
	}
}

func sizeAcknowledgeBatch(c *Command) int {
	n := uvarintLen(uint64(len(c.Acks)))
	for i := range c.Acks {
		a := &c.Acks[i]
		n += AckLen(a.ExecutionID, a.Token, &a.Outcome)
	}
	return n
}

// boundAcknowledgeBatch: the store packs acknowledgements up to
// AckCommandBytes.
func boundAcknowledgeBatch(*Bounds) int { return boundNum + AckCommandBytes }

func checkAcknowledgeBatch(c *Command) string {
	if len(c.Acks) == 0 || len(c.Acks) > MaxAcksPerCommand {
		return "acknowledgement count outside 1.." + itoa(MaxAcksPerCommand)
	}
	for i := range c.Acks {
		if msg := checkAck(c.Acks[i].ExecutionID, &c.Acks[i].Outcome); msg != "" {
			return msg
		}
	}
	return ""
}

// ---- Save-step ------------------------------------------------------------------

//	save-step  id:str token:uv key:str value:str

func encodeSaveStep(dst []byte, c *Command, _ byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	dst = binary.AppendUvarint(dst, c.Token)
	dst = appendStr(dst, c.Key)
	return appendStr(dst, c.Value)
}

func decodeSaveStep(d *Decoder, c *Command, _ byte) {
	c.ExecutionID = d.Str()
	c.Token = d.Uvarint()
	c.Key = d.Str()
	c.Value = d.Str()
}

func sizeSaveStep(c *Command) int {
	return strLen(c.ExecutionID) + uvarintLen(c.Token) + strLen(c.Key) + strLen(c.Value)
}

func boundSaveStep(b *Bounds) int { return b.id() + boundNum + b.str(b.Key) + b.str(b.Value) }

func checkSaveStep(c *Command) string {
	if c.ExecutionID == "" || c.Key == "" {
		return "empty execution ID or step key"
	}
	return ""
}

// ---- Start ----------------------------------------------------------------------

//	start  id:str token:uv key:str workflow:str params:opt child:str
//	       queue:str (version 5) deadline:uv (version 9) concurrency-key:str (version 10)

func encodeStart(dst []byte, c *Command, version byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	dst = binary.AppendUvarint(dst, c.Token)
	dst = appendStr(dst, c.Key)
	dst = appendStr(dst, c.WorkflowID)
	dst = appendOpt(dst, c.Params, c.HasParams)
	dst = appendStr(dst, c.ChildID)
	if version >= 5 {
		dst = appendStr(dst, c.Queue)
	}
	if version >= 9 {
		dst = binary.AppendUvarint(dst, uint64(c.Deadline))
	}
	if version >= 10 {
		dst = appendStr(dst, c.ConcurrencyKey)
	}
	return dst
}

func decodeStart(d *Decoder, c *Command, version byte) {
	c.ExecutionID = d.Str()
	c.Token = d.Uvarint()
	c.Key = d.Str()
	c.WorkflowID = d.Str()
	c.Params, c.HasParams = d.Opt()
	c.ChildID = d.Str()
	if version >= 5 {
		c.Queue = d.Str()
	}
	if version >= 9 {
		c.Deadline = d.Int()
	}
	if version >= 10 {
		c.ConcurrencyKey = d.Str()
	}
}

func sizeStart(c *Command) int {
	return strLen(c.ExecutionID) + uvarintLen(c.Token) + strLen(c.Key) + strLen(c.WorkflowID) +
		optLen(c.Params, c.HasParams) + strLen(c.ChildID) + strLen(c.Queue) + uvarintLen(uint64(c.Deadline)) + strLen(c.ConcurrencyKey)
}

func boundStart(b *Bounds) int {
	return b.id() + boundNum + b.str(b.Key) + b.id() + boundNum + b.Event + b.id() + b.id() + boundNum + boundNum + MaxConcurrencyKeyBytes
}

func checkStart(c *Command) string {
	switch {
	case c.ExecutionID == "" || c.Key == "" || c.WorkflowID == "" || c.ChildID == "":
		return "empty caller, step key, workflow or child ID"
	case c.Deadline < 0:
		return "negative deadline"
	case !validConcurrencyKey(c.ConcurrencyKey):
		return "concurrency key not 0 to " + itoa(MaxConcurrencyKeyBytes) + " bytes of UTF-8"
	}
	return ""
}

// ---- Commit ---------------------------------------------------------------------

//	commit  count:uv, then per write key:str value:opt

func encodeCommit(dst []byte, c *Command, _ byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(c.Writes)))
	for _, w := range c.Writes {
		dst = appendStr(dst, w.Key)
		dst = appendOpt(dst, w.Value, w.HasValue)
	}
	return dst
}

func decodeCommit(d *Decoder, c *Command, _ byte) {
	n := d.Count(2)
	if n > 0 {
		c.Writes = make([]Write, n)
	}
	for i := range c.Writes {
		c.Writes[i].Key = d.Str()
		c.Writes[i].Value, c.Writes[i].HasValue = d.Opt()
	}
}

func sizeCommit(c *Command) int {
	n := uvarintLen(uint64(len(c.Writes)))
	for _, w := range c.Writes {
		n += strLen(w.Key) + optLen(w.Value, w.HasValue)
	}
	return n
}

func boundCommit(b *Bounds) int { return boundNum + b.Commit + b.WritesPerCommit*2*boundNum }

func checkCommit(c *Command) string {
	for _, w := range c.Writes {
		if w.Key == "" {
			return "empty key"
		}
	}
	return ""
}

// ---- Watch ----------------------------------------------------------------------

//	watch  id:str count:uv, then key:str...

func encodeWatch(dst []byte, c *Command, _ byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	dst = binary.AppendUvarint(dst, uint64(len(c.Keys)))
	for _, k := range c.Keys {
		dst = appendStr(dst, k)
	}
	return dst
}

func decodeWatch(d *Decoder, c *Command, _ byte) {
	c.ExecutionID = d.Str()
	n := d.Count(1)
	if n > 0 {
		c.Keys = make([]string, n)
	}
	for i := range c.Keys {
		c.Keys[i] = d.Str()
	}
}

func sizeWatch(c *Command) int {
	n := strLen(c.ExecutionID) + uvarintLen(uint64(len(c.Keys)))
	for _, k := range c.Keys {
		n += strLen(k)
	}
	return n
}

func boundWatch(b *Bounds) int { return b.id() + boundNum + b.KeysPerWatch*b.str(b.Key) }

func checkWatch(c *Command) string {
	if c.ExecutionID == "" || len(c.Keys) == 0 || !sortedUnique(c.Keys) || c.Keys[0] == "" {
		return "empty execution ID, or keys empty, unsorted or repeated"
	}
	return ""
}

// ---- Retire ---------------------------------------------------------------------

//	retire  before:uv limit:uv

func encodeRetire(dst []byte, c *Command, _ byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(c.At))
	return binary.AppendUvarint(dst, uint64(c.Limit))
}

func decodeRetire(d *Decoder, c *Command, _ byte) {
	c.At = d.Int()
	c.Limit = int(d.Int())
}

func sizeRetire(c *Command) int { return uvarintLen(uint64(c.At)) + uvarintLen(uint64(c.Limit)) }

func boundRetire(*Bounds) int { return 2 * boundNum }

func checkRetire(c *Command) string {
	if c.At <= 0 || c.Limit <= 0 {
		return "non-positive time or limit"
	}
	return ""
}

// ---- Cancel ---------------------------------------------------------------------

//	cancel  id:str reason:str (version 2)

func encodeCancel(dst []byte, c *Command, _ byte) []byte {
	dst = appendStr(dst, c.ExecutionID)
	return appendStr(dst, c.Reason)
}

func decodeCancel(d *Decoder, c *Command, _ byte) {
	c.ExecutionID = d.Str()
	c.Reason = d.Str()
}

func sizeCancel(c *Command) int { return strLen(c.ExecutionID) + strLen(c.Reason) }

func boundCancel(b *Bounds) int { return b.id() + b.str(b.CancelReason) }

func checkCancel(c *Command) string {
	if c.ExecutionID == "" {
		return "empty execution ID"
	}
	return ""
}
