package fsm

import (
	"encoding/binary"
	"errors"

	"github.com/execstore/execstore/internal/mutant"
)

// Rate limits (codec version 7, state version 10). A queue's Rate n over
// its Period p bounds the leases claims grant of it: in every window of
// length p, (t-p, t] for every time t of the store's, at most n. It counts
// every lease a claim grants, a redelivery's too (it starts the work
// again), and no expired lease a claim fails instead. The bound is exact:
// it is decided in the claim command, from the times of the grants
// themselves, so replay and replicas decide it the same way.
//
// The grants are kept as runs of (time, count), oldest first: one claim's
// grants of a queue share its time, so a claim of 64 adds one run. A claim
// at now may grant n less those with a time after now-p; a queue with no
// room gives a claim nothing at all (as if it were paused for that claim),
// and becomes claimable at its release time: the time of its n-th latest
// grant plus p. Only the latest n grants and those within the window ever
// matter, so the log drops its oldest run once the rest hold n grants: it
// keeps at most 2n grants and n+1 runs, and the n-th latest grant is always
// in its oldest run, which makes the release time O(1).
//
// Putting a queue's rate or period anew starts its count afresh (the log of
// a rate limit belongs to that limit); putting only its concurrency or pause
// keeps it, and removing the rate drops it.

// MaxQueueRate bounds QueueSettings.Rate: a log keeps at most this many
// runs (16 bytes each) per queue.
const MaxQueueRate = 10_000

// MinRatePeriod and MaxRatePeriod bound QueueSettings.Period (ns).
const (
	MinRatePeriod = int64(1_000_000)                 // a millisecond
	MaxRatePeriod = int64(24 * 3600 * 1_000_000_000) // a day
)

// grantRun is the leases one claim granted of a queue at one time.
type grantRun struct {
	at int64
	n  int
}

// rateLog is a queue's recent grants under its rate limit.
type rateLog struct {
	rate   int   // the settings' Rate and Period the log counts for
	period int64 //
	runs   []grantRun
	head   int // runs[head:] are the log
	total  int // grants in runs[head:]
	// runs[head:win] have left the window at the latest claim, and hold
	// stale grants: a claim's time only moves on, so win only does too.
	// Derived (decoding starts it at head), never encoded.
	win   int
	stale int
}

func newRateLog(st QueueSettings) *rateLog { return &rateLog{rate: st.Rate, period: st.Period} }

// room returns how many leases a claim at now may grant, bringing the
// window up to now.
func (l *rateLog) room(now int64) int {
	edge := now - l.period // grants at or before it are out of the window
	if mutant.RateWindowOneTickShort {
		edge++
	}
	for l.win < len(l.runs) && l.runs[l.win].at <= edge {
		l.stale += l.runs[l.win].n
		l.win++
	}
	return max(0, l.rate-(l.total-l.stale))
}

// release returns the earliest time a claim may grant a lease: 0 while the
// log holds fewer than rate grants, else the time of the rate-th latest
// grant plus the period.
func (l *rateLog) release() int64 {
	if l.total < l.rate {
		return 0
	}
	at := addSaturating(l.runs[l.head].at, l.period)
	if mutant.RateWindowOneTickShort {
		at--
	}
	return at
}

// grant counts n leases granted at now (no earlier than any counted).
func (l *rateLog) grant(now int64, n int) {
	if last := len(l.runs) - 1; last >= l.head && l.runs[last].at == now {
		l.runs[last].n += n
	} else {
		if l.head > 0 && l.head >= len(l.runs)/2 {
			// Reuse the dropped runs' room once they are half the slice.
			k := copy(l.runs, l.runs[l.head:])
			clear(l.runs[k:])
			l.runs, l.win, l.head = l.runs[:k], l.win-l.head, 0
		}
		l.runs = append(l.runs, grantRun{at: now, n: n})
	}
	l.total += n
	for l.total-l.runs[l.head].n >= l.rate {
		n := l.runs[l.head].n
		l.total -= n
		if l.head < l.win {
			l.stale -= n
		} else {
			l.win++
		}
		l.head++
	}
}

// inWindow returns the grants within the window ending at now, without
// moving the log's window (for readers).
func (l *rateLog) inWindow(now int64) int {
	n := 0
	for i := len(l.runs) - 1; i >= l.head && l.runs[i].at > now-l.period; i-- {
		n += l.runs[i].n
	}
	return n
}

func (l *rateLog) copy() *rateLog {
	c := *l
	c.runs = append([]grantRun(nil), l.runs[l.head:]...)
	c.win -= l.head
	c.head = 0
	return &c
}

// RateGranted returns the leases granted of a queue within its rate's
// window that ends at now (0 without a rate limit). It may run in several
// goroutines at once.
func (s *State) RateGranted(name string, now int64) int {
	if l := s.rates[name]; l != nil {
		return l.inWindow(now)
	}
	return 0
}

// noteGrant counts a lease a claim at now granted of a queue, if it has a
// rate limit.
func (s *State) noteGrant(name string, now int64) {
	if l := s.rates[name]; l != nil {
		l.grant(now, 1)
	}
}

// setRate keeps, starts afresh or drops a queue's rate log for its new
// settings.
func (s *State) setRate(old QueueSettings, had bool, st QueueSettings) {
	switch {
	case st.Rate == 0:
		delete(s.rates, st.Name)
	case !had || old.Rate != st.Rate || old.Period != st.Period:
		if s.rates == nil {
			s.rates = make(map[string]*rateLog)
		}
		s.rates[st.Name] = newRateLog(st)
	}
}

// checkRates verifies that the rate logs are those of the settings with a
// rate, and that none ever granted over its rate in any window.
func (s *State) checkRates() error {
	n := 0
	var err error
	s.qsettings.Scan(func(st QueueSettings) bool {
		if st.Rate == 0 {
			return true
		}
		n++
		l := s.rates[st.Name]
		if l == nil {
			err = errors.New("fsm: invariant violated: queue " + quote(st.Name) + " has a rate and no log of its grants")
		} else if msg := l.check(); msg != "" {
			err = errors.New("fsm: invariant violated: queue " + quote(st.Name) + ": " + msg)
		} else if l.rate != st.Rate || l.period != st.Period {
			err = errors.New("fsm: invariant violated: queue " + quote(st.Name) + "'s grant log counts for another rate")
		}
		return err == nil
	})
	if err == nil && n != len(s.rates) {
		err = errors.New("fsm: invariant violated: " + itoa(uint64(len(s.rates))) + " grant logs for " + itoa(uint64(n)) + " rate limits")
	}
	return err
}

// check verifies a log's runs: in time order, each of a grant at least; the
// latest rate of them in its oldest run; at most rate in every window; the
// counts it keeps.
func (l *rateLog) check() string {
	runs := l.runs[l.head:]
	total, stale := 0, 0
	for i, r := range runs {
		if r.n < 1 || (i > 0 && r.at <= runs[i-1].at) {
			return "grant runs out of order or empty"
		}
		total += r.n
		if l.head+i < l.win {
			stale += r.n
		}
	}
	switch {
	case total != l.total || stale != l.stale || l.win < l.head || l.win > len(l.runs):
		return "grant log counts " + itoa(uint64(l.total)) + " grants, holds " + itoa(uint64(total))
	case len(runs) > 0 && total-runs[0].n >= l.rate:
		return "grant log keeps a run it no longer needs"
	}
	// Every window that starts at a run: the grants from it until a period
	// later.
	sum, j := 0, 0
	for i := range runs {
		for j < len(runs) && runs[j].at < runs[i].at+l.period {
			sum += runs[j].n
			j++
		}
		if sum > l.rate {
			return itoa(uint64(sum)) + " leases granted within a period from " + itoa(uint64(runs[i].at)) + ", over the rate of " + itoa(uint64(l.rate))
		}
		sum -= runs[i].n
	}
	return ""
}

// ---- State encoding ------------------------------------------------------------

//	(version 10, after each queue's settings) rate:uv period:uv, then if
//	rate > 0 the grant log: runs:uv, then (at:uv n:uv) oldest first

func (l *rateLog) encode(e *encoder) {
	runs := l.runs[l.head:]
	e.uv(uint64(len(runs)))
	for _, r := range runs {
		e.uv(uint64(r.at))
		e.uv(uint64(r.n))
	}
}

func decodeRateLog(d *streamDecoder, st QueueSettings) (*rateLog, error) {
	l := newRateLog(st)
	n := d.count(uint64(st.Rate) + 1)
	if n > 0 {
		l.runs = make([]grantRun, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		r := grantRun{at: d.int(), n: int(d.int())}
		l.runs = append(l.runs, r)
		l.total += r.n
	}
	if d.err != nil {
		return nil, d.err
	}
	if msg := l.check(); msg != "" {
		return nil, decodeErr("state: queue " + quote(st.Name) + ": " + msg)
	}
	return l, nil
}

// rateLog checks a grant log as decodeRateLog reads it.
func (c *checker) rateLog(name []byte, st QueueSettings) error {
	l := newRateLog(st)
	n := c.count(uint64(st.Rate) + 1)
	for i := 0; i < n && c.err == nil; i++ {
		r := grantRun{at: c.int(), n: int(c.int())}
		l.runs = append(l.runs, r)
		l.total += r.n
	}
	if c.err != nil {
		return c.err
	}
	if msg := l.check(); msg != "" {
		return decodeErr("state: queue " + quote(string(name)) + ": " + msg)
	}
	return nil
}

// appendRate appends a put's rate fields (codec version 7).
func appendRate(dst []byte, st *QueueSettings) []byte {
	dst = binary.AppendUvarint(dst, uint64(st.Rate))
	return binary.AppendUvarint(dst, uint64(st.Period))
}
