package fsm

import (
	"errors"

	"github.com/execstore/execstore/internal/mutant"
)

// Claim request keys. A claim may carry a request key (codec version 3): the
// state then remembers, under the key, the leases the claim granted, until
// the claim's lease duration has passed. A claim repeated with the key in
// that time (a worker whose answer was lost) leases nothing new: it answers
// the granted leases that are still current, with their expiries as they
// are now, and changes nothing, so precheck answers it without logging. A
// repeat with another limit or lease duration is CodeMismatch. A keyed claim
// that leased nothing is not remembered: its repeat claims afresh, as it
// should. After the lease duration every granted lease has expired unless
// it was renewed, which only a worker holding the answer can do, so the key
// is forgotten.
//
// The table is bounded: MaxGrantLeases leases across every key, the
// earliest-expiring grant evicted first when a new one would pass it (a
// repeat of an evicted key claims afresh, as a claim without a key would,
// and the leases it granted expire). Expired grants are removed by the keyed
// claims that lease (at most grantPurge each, so no claim pays for a burst),
// and never read: a lookup checks the expiry against the command's time.
// Grants are never changed once made, so a state and its copies share them.

// MaxRequestKeyLen bounds a claim's request key, in bytes.
const MaxRequestKeyLen = 128

// MaxGrantLeases bounds the leases remembered for claim request keys, every
// key's together: about 6 MiB of state at most.
const MaxGrantLeases = 1 << 17

// grantPurge is the most expired grants one keyed claim removes.
const grantPurge = 64

// grant is what a keyed claim granted.
type grant struct {
	Key      string
	Expires  int64 // the claim's time plus its lease duration
	Limit    int   // the claim's arguments, which a repeat must match
	Duration int64
	Leases   []GrantedLease // in the order the claim answered them
}

// GrantedLease is one lease a keyed claim granted.
type GrantedLease struct {
	ExecutionID string
	Token       uint64
}

type grantItem struct {
	Key string
	g   *grant
}

func grantLess(a, b grantItem) bool { return a.Key < b.Key }

// grantExpiry is the grants' expiry index: (Expires, Key).
type grantExpiry struct {
	At  int64
	Key string
}

func grantExpiryLess(a, b grantExpiry) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	return a.Key < b.Key
}

// liveGrant returns the grant of key if it has not expired at now.
func (s *State) liveGrant(key string, now int64) (*grant, bool) {
	it, ok := s.grants.Get(grantItem{Key: key})
	if !ok || it.g.Expires <= now {
		return nil, false
	}
	return it.g, true
}

// replayGrant answers a repeated keyed claim: the granted leases still
// current, as they are now. It changes nothing.
func (s *State) replayGrant(g *grant, c *Command, dry bool) Result {
	if c.Limit != g.Limit || c.Duration != g.Duration {
		return Result{Code: CodeMismatch}
	}
	var leases []Lease
	if dry {
		leases = make([]Lease, 0, len(g.Leases))
	} else {
		leases = s.leaseBuf(len(g.Leases))
	}
	for _, gl := range g.Leases {
		if p := s.lookup(gl.ExecutionID); p != nil && p.LeaseToken() == gl.Token {
			leases = append(leases, Lease{ExecutionID: gl.ExecutionID, Token: gl.Token, ExpiresAt: p.LeaseExpiresAt()})
		}
	}
	return Result{Leases: leases, Unchanged: true}
}

// keepGrant remembers the leases a keyed claim granted (not empty), after
// removing expired grants and, if the bound requires, the earliest-expiring
// live ones.
func (s *State) keepGrant(c *Command, now int64, leases []Lease) {
	for n := 0; n < grantPurge; n++ {
		k, ok := s.grantExp.Min()
		if !ok || k.At > now {
			break
		}
		s.dropGrant(k.Key)
	}
	if _, ok := s.grants.Get(grantItem{Key: c.RequestKey}); ok {
		s.dropGrant(c.RequestKey) // expired: liveGrant did not find it
	}
	for s.grantLeases+len(leases) > MaxGrantLeases {
		k, ok := s.grantExp.Min()
		if !ok {
			break
		}
		s.dropGrant(k.Key)
	}
	g := &grant{Key: c.RequestKey, Expires: addSaturating(now, c.Duration), Limit: c.Limit, Duration: c.Duration,
		Leases: make([]GrantedLease, len(leases))}
	for i, l := range leases {
		g.Leases[i] = GrantedLease{ExecutionID: l.ExecutionID, Token: l.Token}
	}
	s.addGrant(g)
}

func (s *State) addGrant(g *grant) {
	s.grants.Set(grantItem{Key: g.Key, g: g})
	s.grantExp.Set(grantExpiry{At: g.Expires, Key: g.Key})
	s.grantLeases += len(g.Leases)
}

func (s *State) dropGrant(key string) {
	it, ok := s.grants.Delete(grantItem{Key: key})
	if !ok {
		return
	}
	s.grantExp.Delete(grantExpiry{At: it.g.Expires, Key: key})
	s.grantLeases -= len(it.g.Leases)
}

// Grants calls fn with each remembered request key, in key order: the
// claim's expiry, arguments and granted leases (fn must not keep the
// slice). For tests and inspection.
func (s *State) Grants(fn func(key string, expires int64, limit int, duration int64, leases []GrantedLease) bool) {
	s.grants.Scan(func(it grantItem) bool {
		g := it.g
		return fn(g.Key, g.Expires, g.Limit, g.Duration, g.Leases)
	})
}

// checkGrant reports what is wrong with a grant, or "".
func checkGrant(g *grant) string {
	if msg := checkGrantHead(len(g.Key), g.Expires, g.Limit, g.Duration, len(g.Leases)); msg != "" {
		return msg
	}
	for _, l := range g.Leases {
		if msg := checkGrantedLease(len(l.ExecutionID), l.Token); msg != "" {
			return msg
		}
	}
	return ""
}

func checkGrantHead(keyLen int, expires int64, limit int, duration int64, leases int) string {
	switch {
	case keyLen == 0 || keyLen > MaxRequestKeyLen:
		return "request key empty or longer than " + itoa(MaxRequestKeyLen) + " bytes"
	case limit <= 0 || duration <= 0 || expires <= 0:
		return "non-positive limit, duration or expiry"
	case leases == 0 || leases > limit:
		return "no leases, or more than the claim's limit"
	}
	return ""
}

func checkGrantedLease(idLen int, token uint64) string {
	if idLen == 0 || token == 0 {
		return "a granted lease without an execution or a token"
	}
	return ""
}

// checkGrants verifies each grant, the expiry index and the lease count.
func (s *State) checkGrants() error {
	var err error
	leases := 0
	s.grants.Scan(func(it grantItem) bool {
		if msg := checkGrant(it.g); msg != "" || it.Key != it.g.Key {
			err = errors.New("fsm: invariant violated: request key " + quote(it.Key) + ": " + msg)
			return false
		}
		if _, ok := s.grantExp.Get(grantExpiry{At: it.g.Expires, Key: it.Key}); !ok {
			err = errors.New("fsm: invariant violated: request key " + quote(it.Key) + " missing from the grants' expiry index")
			return false
		}
		leases += len(it.g.Leases)
		return true
	})
	switch {
	case err != nil:
		return err
	case s.grantExp.Len() != s.grants.Len():
		return errors.New("fsm: invariant violated: the grants' expiry index holds " + itoa(uint64(s.grantExp.Len())) + " entries for " + itoa(uint64(s.grants.Len())) + " grants")
	case leases != s.grantLeases || leases > MaxGrantLeases:
		return errors.New("fsm: invariant violated: the grants hold " + itoa(uint64(leases)) + " leases, counted " + itoa(uint64(s.grantLeases)))
	}
	return nil
}

// encodeGrants writes the grants (state version 5), in key order:
//
//	grants  count:uv, then (key:str expires:uv limit:uv duration:uv
//	        count:uv (execution:str token:uv)...) in key order
func (s *State) encodeGrants(e *encoder) {
	if mutant.SnapshotForgetsGrants {
		e.uv(0)
		return
	}
	e.uv(uint64(s.grants.Len()))
	s.grants.Scan(func(it grantItem) bool {
		g := it.g
		e.buf = appendStr(e.buf, g.Key)
		e.uv(uint64(g.Expires))
		e.uv(uint64(g.Limit))
		e.uv(uint64(g.Duration))
		e.uv(uint64(len(g.Leases)))
		for _, l := range g.Leases {
			e.buf = appendStr(e.buf, l.ExecutionID)
			e.uv(l.Token)
		}
		e.flush(false)
		return e.err == nil
	})
}

// decodeGrants reads what encodeGrants wrote.
func (s *State) decodeGrants(d *streamDecoder) error {
	n := d.count(MaxGrantLeases)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		g := &grant{Key: d.Str()}
		g.Expires, g.Limit, g.Duration = d.int(), int(d.int()), d.int()
		m := d.count(MaxGrantLeases)
		g.Leases = make([]GrantedLease, 0, min(m, 1024))
		for j := 0; j < m && d.err == nil; j++ {
			g.Leases = append(g.Leases, GrantedLease{ExecutionID: d.Str(), Token: d.Uvarint()})
		}
		if d.err != nil {
			break
		}
		if i > 0 && g.Key <= prev {
			return decodeErr("state: request keys out of order at " + quote(g.Key))
		}
		if msg := checkGrant(g); msg != "" {
			return decodeErr("state: request key " + quote(g.Key) + ": " + msg)
		}
		if s.grantLeases+len(g.Leases) > MaxGrantLeases {
			return decodeErr("state: the request keys hold more than " + itoa(MaxGrantLeases) + " leases")
		}
		prev = g.Key
		s.addGrant(g)
	}
	return d.err
}

// grants is CheckState's reading of what decodeGrants reads, with the same
// checks in the same order.
func (c *checker) grants(sum *StateSummary) error {
	total := 0
	for i, n := 0, c.count(MaxGrantLeases); i < n && c.err == nil; i++ {
		key := c.str(&c.key[0])
		expires, limit, duration := c.int(), int(c.int()), c.int()
		m := c.count(MaxGrantLeases)
		leaseMsg := ""
		for j := 0; j < m && c.err == nil; j++ {
			id := c.skipStr()
			if msg := checkGrantedLease(len(nonEmpty(id)), c.Uvarint()); leaseMsg == "" {
				leaseMsg = msg
			}
		}
		if c.err != nil {
			break
		}
		if !c.after(i == 0, key, nil) {
			return decodeErr("state: request keys out of order at " + quote(string(key)))
		}
		msg := checkGrantHead(len(key), expires, limit, duration, m)
		if msg == "" {
			msg = leaseMsg
		}
		if msg != "" {
			return decodeErr("state: request key " + quote(string(key)) + ": " + msg)
		}
		if total += m; total > MaxGrantLeases {
			return decodeErr("state: the request keys hold more than " + itoa(MaxGrantLeases) + " leases")
		}
		sum.Grants++
	}
	return c.err
}
