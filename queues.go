package execstore

import (
	"context"
	"slices"
	"time"

	"github.com/execstore/execstore/fsm"
)

// QueueSettings is a queue's flow control: what claims may take from it.
// Settings are kept by queue name, apart from the queue's executions: they
// apply to a queue before anything is admitted to it and after it empties.
type QueueSettings struct {
	// Name is the queue's: an AdmitRequest.Queue, or a workflow ID (each
	// workflow's own queue). 1 to IDBytes bytes of UTF-8 without control
	// characters.
	Name string
	// Concurrency, when positive, is the most executions of the queue that
	// hold a current lease at once, across every worker and claim: a claim
	// takes no more of its due executions than the limit leaves room for.
	// An expired lease counts until a claim supersedes it (which that claim
	// may do at the limit: a redelivery replaces a lease, it adds none), so
	// a stalled worker holds its place until its lease expires. Lowering the
	// limit below the leases held ends none of them; claims take nothing new
	// until enough have ended. 0: no limit. At most MaxQueueConcurrency.
	Concurrency int
	// Paused: claims take nothing from the queue, not even its expired
	// leases, until it is resumed. Admissions, wakes and the leases already
	// held go on as before.
	Paused bool
	// Rate, when positive, is the most leases claims grant of the queue in
	// any window of RatePeriod: for every time t of the store's, the leases
	// granted in (t-RatePeriod, t] are at most Rate. It is exact, not
	// approximate, since the claim command decides it from the times of the
	// grants themselves. Every lease counts, a redelivery's too (it starts
	// the work again); an expired lease a claim fails instead does not. A
	// queue whose window is full gives a claim nothing, as if it were paused
	// for that claim, until the earliest of the grants that fill it is
	// RatePeriod old; NextDue reports that time. Putting another Rate or
	// RatePeriod starts the count afresh (the grants before it no longer
	// count); putting only Concurrency or Paused keeps it. 0: no limit. At
	// most MaxQueueRate: a higher rate is a shorter period (100,000 a second
	// is at most 10,000 in every 100 ms).
	Rate int
	// RatePeriod is the rate's window, from MinRatePeriod to MaxRatePeriod
	// in whole milliseconds (as HTTP writes it, so that a put read back over
	// HTTP and put again is the same); required with a Rate, 0 without.
	RatePeriod time.Duration
	// KeyLimit, when positive, is the most executions of one concurrency
	// key (AdmitRequest.ConcurrencyKey) that hold a slot at once; KeyMode
	// says what holding one means. A key's other executions wait, in the
	// order they became due (then by ID), whatever their priority, and
	// claims do not look at them until the key has a free slot: a key with a
	// million waiting costs a claim nothing. Executions without a key are
	// not limited. Lowering the limit takes no slot away. 0: no limit. At
	// most MaxQueueConcurrency.
	KeyLimit int
	// KeyMode is what holding one of a key's slots means: KeyLeased (the
	// default, "" when put) while the execution holds a current lease, which
	// bounds the calls in flight for one key; KeyLive from its first lease
	// until it ends, through its suspensions and sleeps, which runs a key's
	// executions one after another (with KeyLimit 1), each to its end.
	// Changing it counts the queue's keys again. "" without a KeyLimit.
	KeyMode KeyMode
}

// KeyMode is what holding a slot of a concurrency key means
// (QueueSettings.KeyMode).
type KeyMode string

const (
	// KeyLeased: an execution holds its key's slot while it holds a current
	// lease (expired or not, until superseded).
	KeyLeased KeyMode = "leased"
	// KeyLive: an execution holds its key's slot from its first lease until
	// it ends.
	KeyLive KeyMode = "live"
)

// MaxQueueConcurrency bounds QueueSettings.Concurrency.
const MaxQueueConcurrency = fsm.MaxQueueConcurrency

// MaxQueueRate bounds QueueSettings.Rate. The store keeps at most the
// latest MaxQueueRate grant times of a rate-limited queue (16 bytes each).
const MaxQueueRate = fsm.MaxQueueRate

// MinRatePeriod and MaxRatePeriod bound QueueSettings.RatePeriod.
const (
	MinRatePeriod = time.Duration(fsm.MinRatePeriod)
	MaxRatePeriod = time.Duration(fsm.MaxRatePeriod)
)

// MaxQueueSettings bounds the queues that have settings.
const MaxQueueSettings = fsm.MaxQueueSettings

// QueueInfo is a queue's settings and its counts at the store's time.
type QueueInfo struct {
	QueueSettings
	// Live counts the queue's executions that are not terminal; Due, those
	// due now without a current lease; Leased, its current leases; Expired,
	// those of them that have expired, which a claim would supersede.
	Live, Due, Leased, Expired int
	// Granted counts the leases granted within the rate's window that ends
	// at the store's time (0 without a Rate): Rate minus Granted is what a
	// claim could take now.
	Granted int
	// Parked counts the executions waiting for a slot of their concurrency
	// key (not counted in Due), which no claim looks at until the key has
	// one; QueueKeys lists the keys.
	Parked int
}

// KeyInfo is one concurrency key's counts in a queue with a KeyLimit.
type KeyInfo struct {
	Key string
	// Holding counts the key's executions that hold a slot; Ready, those
	// waiting that a claim may take (when due); Parked, those waiting for a
	// slot.
	Holding, Ready, Parked int
}

// QueueKeysMax bounds what QueueKeys returns.
const QueueKeysMax = 1000

// QueueKeys returns the concurrency keys of a queue with a KeyLimit that
// have executions holding a slot or waiting, the most waiting first (then
// by key), at most limit of them (at most QueueKeysMax): a queue's backlog by
// key. A queue without a KeyLimit has none. Errors: ErrInvalidArgument (a
// bad name, or limit outside 1..QueueKeysMax).
func (s *Store) QueueKeys(ctx context.Context, name string, limit int) ([]KeyInfo, error) {
	if err := idError(ErrInvalidArgument, "queue", name); err != nil {
		return nil, err
	}
	if limit < 1 || limit > QueueKeysMax {
		return nil, invalidArg("limit %d is outside 1..%d", limit, QueueKeysMax)
	}
	var out []KeyInfo
	err := s.read(ctx, func(st *fsm.State) {
		st.QueueKeys(name, limit, func(k fsm.QueueKeyStats) bool {
			out = append(out, KeyInfo{Key: k.Key, Holding: k.Holding, Ready: k.Ready, Parked: k.Parked})
			return true
		})
	})
	return out, err
}

// PutQueue sets a queue's settings, replacing any it had, and returns them.
// Settings identical to those stored write nothing; settings that limit
// nothing (no concurrency limit, no rate, no key limit, not paused) are the absence of
// settings, and put removes any the queue had. The queue's executions are
// untouched: a pause or a lower limit ends no lease. Errors:
// ErrInvalidArgument (a bad name, limit, rate, period or key mode), ErrLimitExceeded
// (MaxQueueSettings queues have settings already, or the limit or rate is
// over MaxQueueConcurrency or MaxQueueRate); nothing is written.
func (s *Store) PutQueue(ctx context.Context, st QueueSettings) (QueueSettings, error) {
	if err := idError(ErrInvalidArgument, "queue", st.Name); err != nil {
		return QueueSettings{}, err
	}
	switch {
	case st.Concurrency < 0:
		return QueueSettings{}, invalidArg("queue concurrency %d is negative", st.Concurrency)
	case st.Concurrency > MaxQueueConcurrency:
		return QueueSettings{}, overLimit(ErrInvalidArgument, "queue concurrency %d is over the limit of %d", st.Concurrency, MaxQueueConcurrency)
	case st.Rate < 0:
		return QueueSettings{}, invalidArg("queue rate %d is negative", st.Rate)
	case st.Rate > MaxQueueRate:
		return QueueSettings{}, overLimit(ErrInvalidArgument, "queue rate %d is over the limit of %d", st.Rate, MaxQueueRate)
	case st.Rate > 0 && st.RatePeriod < MinRatePeriod:
		return QueueSettings{}, invalidArg("queue rate period %v is under %v", st.RatePeriod, MinRatePeriod)
	case st.Rate > 0 && st.RatePeriod > MaxRatePeriod:
		return QueueSettings{}, overLimit(ErrInvalidArgument, "queue rate period %v is over the limit of %v", st.RatePeriod, MaxRatePeriod)
	case st.RatePeriod%time.Millisecond != 0:
		return QueueSettings{}, invalidArg("queue rate period %v is not a whole number of milliseconds", st.RatePeriod)
	case st.Rate == 0 && st.RatePeriod != 0:
		return QueueSettings{}, invalidArg("queue rate period %v without a rate", st.RatePeriod)
	case st.KeyLimit < 0:
		return QueueSettings{}, invalidArg("queue key limit %d is negative", st.KeyLimit)
	case st.KeyLimit > MaxQueueConcurrency:
		return QueueSettings{}, overLimit(ErrInvalidArgument, "queue key limit %d is over the limit of %d", st.KeyLimit, MaxQueueConcurrency)
	case st.KeyMode != "" && st.KeyMode != KeyLeased && st.KeyMode != KeyLive:
		return QueueSettings{}, invalidArg("queue key mode %q is neither %q nor %q", st.KeyMode, KeyLeased, KeyLive)
	case st.KeyLimit == 0 && st.KeyMode == KeyLive:
		return QueueSettings{}, invalidArg("queue key mode %q without a key limit", st.KeyMode)
	case st.Concurrency == 0 && !st.Paused && st.Rate == 0 && st.KeyLimit == 0:
		if err := s.DeleteQueue(ctx, st.Name); err != nil {
			return QueueSettings{}, err
		}
		return st, nil
	}
	def := fsm.QueueSettings{Name: st.Name, Concurrency: st.Concurrency, Paused: st.Paused, Rate: st.Rate, Period: int64(st.RatePeriod),
		KeyLimit: st.KeyLimit, KeyLive: st.KeyMode == KeyLive}
	c := fsm.Command{Kind: fsm.KindPutQueue, QueueSettings: &def, Limit: MaxQueueSettings}
	res, err := s.do(ctx, &c)
	if err != nil {
		return QueueSettings{}, err
	}
	if err := resultErr(&res, &c); err != nil {
		return QueueSettings{}, err
	}
	return queueSettingsFromFSM(*res.QueueSettings), nil
}

// DeleteQueue removes a queue's settings: claims take from it again
// without a limit. Its executions are untouched. A queue without settings
// writes nothing and is no error. Errors: ErrInvalidArgument (a bad name).
func (s *Store) DeleteQueue(ctx context.Context, name string) error {
	if err := idError(ErrInvalidArgument, "queue", name); err != nil {
		return err
	}
	c := fsm.Command{Kind: fsm.KindDeleteQueue, Queue: name}
	res, err := s.do(ctx, &c)
	if err != nil {
		return err
	}
	return resultErr(&res, &c)
}

// Queue returns a queue's settings (the defaults when it has none) and its
// counts. Any name is a queue, empty or not. Errors: ErrInvalidArgument (a
// bad name).
func (s *Store) Queue(ctx context.Context, name string) (QueueInfo, error) {
	if err := idError(ErrInvalidArgument, "queue", name); err != nil {
		return QueueInfo{}, err
	}
	var out QueueInfo
	err := s.read(ctx, func(st *fsm.State) {
		set, _ := st.QueueSettingsOf(name)
		now := s.readTime(st)
		q := st.QueueStatsOf(name, now)
		out = QueueInfo{QueueSettings: queueSettingsFromFSM(set), Live: q.Live, Due: q.Due, Leased: q.Leased, Expired: q.Expired,
			Granted: st.RateGranted(name, now), Parked: q.Parked}
	})
	return out, err
}

// ListQueuesMax bounds what ListQueues returns.
const ListQueuesMax = 1000

// ListQueues returns the queues that have settings or executions that are
// not terminal, in name order, at most ListQueuesMax of them from the first
// name after `after` ("" for the first page): a page is full when more may
// follow.
func (s *Store) ListQueues(ctx context.Context, after string) ([]QueueInfo, error) {
	var out []QueueInfo
	err := s.read(ctx, func(st *fsm.State) { out = queuesPage(st, after, ListQueuesMax, s.readTime(st)) })
	return out, err
}

// readTime is the time a read of st counts at: the clock's reading, never
// before the store's time (as Now).
func (s *Store) readTime(st *fsm.State) int64 {
	clock, ok := nanosFromTime(s.opts.Now())
	if last := st.Meta().Now; !ok || clock < last {
		clock = last
	}
	return clock
}

// queuesPage returns the queues with settings or live executions, in name
// order, at most limit of them from the first name after `after`, with
// their counts at now.
func queuesPage(st *fsm.State, after string, limit int, now int64) []QueueInfo {
	byName := map[string]*QueueInfo{}
	var names []string
	add := func(name string) *QueueInfo {
		if q, ok := byName[name]; ok {
			return q
		}
		names = append(names, name)
		q := &QueueInfo{QueueSettings: QueueSettings{Name: name}}
		byName[name] = q
		return q
	}
	// The first limit names of the two sets together are among the first
	// limit of each.
	n := 0
	st.EachQueueSettings(after, func(set fsm.QueueSettings) bool {
		i := add(set.Name)
		i.QueueSettings = queueSettingsFromFSM(set)
		i.Granted = st.RateGranted(set.Name, now)
		n++
		return n < limit
	})
	st.Queues(now, after, limit, func(q fsm.QueueStats) bool {
		i := add(q.Name)
		i.Live, i.Due, i.Leased, i.Expired, i.Parked = q.Live, q.Due, q.Leased, q.Expired, q.Parked
		return true
	})
	slices.Sort(names)
	names = names[:min(len(names), limit)]
	out := make([]QueueInfo, len(names))
	for i, n := range names {
		out[i] = *byName[n]
	}
	return out
}

// queuesCount counts the queues with settings or live executions.
func queuesCount(st *fsm.State) int {
	n := st.QueueCount() + st.QueueSettingsCount()
	st.EachQueueSettings("", func(set fsm.QueueSettings) bool {
		if st.QueueStatsOf(set.Name, 0).Live > 0 {
			n-- // counted with the live queues
		}
		return true
	})
	return n
}

func queueSettingsFromFSM(st fsm.QueueSettings) QueueSettings {
	out := QueueSettings{Name: st.Name, Concurrency: st.Concurrency, Paused: st.Paused, Rate: st.Rate, RatePeriod: time.Duration(st.Period),
		KeyLimit: st.KeyLimit}
	switch {
	case st.KeyLive:
		out.KeyMode = KeyLive
	case st.KeyLimit > 0:
		out.KeyMode = KeyLeased
	}
	return out
}
