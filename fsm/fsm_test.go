package fsm

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore/fsm/internal/chunk"
	"github.com/execstore/execstore/fsm/internal/record"
)

// dump is a state's whole value, for comparing states.
type dump struct {
	Meta    Meta
	Execs   []Execution
	Queues  []queueDump
	Steps   []stepEntry
	Starts  []startEntry
	KV      []kvEntry
	Watches []watch
	WKeys   []watchKey
	WExecs  []execWatch
	Retired []Retired
	RetIDs  []string
	Ended   []dueKey
	List    listDump
	// Grants: each remembered request key's grant, the expiry index and the
	// leases they hold together.
	Grants      []grant
	GrantExp    []grantExpiry
	GrantLeases int
}

// listDump is the listing indexes and the change log by value: each entry
// names its record by ID and its workflow by name, and the change log holds
// its live entries (which entries are dead and how the log is cut into
// chunks depend on the history, not the value).
type listDump struct {
	Admitted   []listedAs // the admission table, in number order
	ByWorkflow []listedAs // in (workflow, admission) order
	ByParent   []listedAs // in (parent, admission) order
	Changes    []Change
	Counts     [statusCap]int
	Workflows  []workflowDump
}

// workflowDump is a workflow and its count of records.
type workflowDump struct {
	Name string
	N    int
}

type listedAs struct {
	Status Status
	Group  string
	No     uint64
	ID     string
}

func listDumpOf(s *State) listDump {
	l := &s.list
	d := listDump{Counts: l.counts}
	l.workflows.Scan(func(w workflowCount) bool {
		d.Workflows = append(d.Workflows, workflowDump{Name: w.Name, N: w.p.Total()})
		w.p.Walk(1, s.meta.Admitted+1, false, &l.adm.t, func(no uint64, e *stored) bool {
			d.ByWorkflow = append(d.ByWorkflow, listedAs{Group: w.Name, No: no, ID: e.ID()})
			return true
		})
		return true
	})
	l.walkTable(&walk{q: &ListQuery{Limit: 1 << 30}, scanMax: -1, fn: func(e *Execution) {
		d.Admitted = append(d.Admitted, listedAs{Status: e.Status, No: e.AdmitNo, ID: e.ID})
	}}, 1, s.meta.Admitted+1)
	l.parents.Scan(func(g parentGroup) bool {
		g.p.Walk(1, s.meta.Admitted+1, false, &l.adm.t, func(no uint64, e *stored) bool {
			d.ByParent = append(d.ByParent, listedAs{Group: g.Parent, No: no, ID: e.ID()})
			return true
		})
		return true
	})
	s.Changes(0, l.feed.n+1, l.feed.n+1, func(c Change) { d.Changes = append(d.Changes, c) })
	return d
}

// queueDump is one queue by value: its name, live count and the entries
// of its two claimable indexes.
type queueDump struct {
	Name        string
	Live        int
	Due, Leases []claimKey
}

// queuesOf returns the state's queues in name order.
func queuesOf(s *State) []queueDump {
	var out []queueDump
	for _, q := range s.queueList {
		d := queueDump{Name: q.name, Live: q.live}
		for _, l := range q.lanes {
			d.Due = append(d.Due, collect[claimKey](l.due)...)
			d.Leases = append(d.Leases, collect[claimKey](l.leases)...)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b queueDump) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func collect[T any](tr interface{ Scan(func(T) bool) }) []T {
	var out []T
	tr.Scan(func(v T) bool { out = append(out, v); return true })
	return out
}

// records returns every record by value (without the stored record's
// generation, which says where it may be changed in place, not what it is).
func records(s *State) []Execution {
	var out []Execution
	s.execs.Scan(func(it execItem) bool {
		out = append(out, s.rec(it).Value())
		return true
	})
	return out
}

func retiredRecords(s *State) []Retired {
	var out []Retired
	s.retired.Scan(func(it retiredItem) bool { out = append(out, *it.r); return true })
	return out
}

func retiredIDs(s *State) []string {
	var out []string
	s.retired.Scan(func(it retiredItem) bool { out = append(out, it.ID); return true })
	return out
}

func dumpOf(s *State) dump {
	return dump{
		Meta:    s.meta,
		Execs:   records(s),
		Queues:  queuesOf(s),
		Steps:   collect[stepEntry](s.steps),
		Starts:  collect[startEntry](s.starts),
		KV:      collect[kvEntry](s.kv),
		Watches: collect[watch](s.watches),
		WKeys:   collect[watchKey](s.wkeys),
		WExecs:  collect[execWatch](s.wexecs),
		Retired: retiredRecords(s),
		RetIDs:  retiredIDs(s),
		Ended:   collect[dueKey](s.ended),
		List:    listDumpOf(s),

		Grants:      grantsOf(s),
		GrantExp:    collect[grantExpiry](s.grantExp),
		GrantLeases: s.grantLeases,
	}
}

func grantsOf(s *State) []grant {
	var out []grant
	s.grants.Scan(func(it grantItem) bool { out = append(out, *it.g); return true })
	return out
}

var cmpOpts = cmp.Options{
	cmp.AllowUnexported(dump{}, claimKey{}, listDump{}, Execution{}),
	// A stored record compares by the record it holds.
	cmp.Transformer("record", func(s *stored) Execution { return s.Value() }),
}

// gen produces random but structurally valid commands over a small space of
// IDs, keys and times, so that conflicts, lost leases, merges and repeats are
// frequent.
type gen struct {
	rng    *rand.Rand
	now    int64
	tokens []uint64 // tokens seen in claim results, reused (often stale)
	scheds genSchedules
}

func (g *gen) id() string  { return fmt.Sprintf("e%d", g.rng.IntN(12)) }
func (g *gen) key() string { return fmt.Sprintf("k%d", g.rng.IntN(5)) }
func (g *gen) token() uint64 {
	if len(g.tokens) == 0 || g.rng.IntN(5) == 0 {
		return uint64(g.rng.IntN(4))
	}
	return g.tokens[g.rng.IntN(len(g.tokens))]
}

// queue is an admission's or a child start's queue: mostly the default, at
// times one of two named queues or the workflow's own name (the default by
// another spelling).
func (g *gen) queue() string {
	return []string{"", "", "", "q1", "q2", "w"}[g.rng.IntN(6)]
}

// queueName is the name of a queue whose settings a command puts or
// deletes: the workflows' own and the named ones.
func (g *gen) queueName() string { return []string{"w", "child", "q1", "q2"}[g.rng.IntN(4)] }

// claimQueues is a claim's selection: mostly every queue, at times a sorted
// subset of the queues the generator uses and one it never does.
func (g *gen) claimQueues() []string {
	if g.rng.IntN(2) == 0 {
		return nil
	}
	var sel []string
	for _, q := range []string{"child", "none", "q1", "q2", "w"} {
		if g.rng.IntN(2) == 0 {
			sel = append(sel, q)
		}
	}
	return sel
}

func (g *gen) outcome() Outcome {
	switch g.rng.IntN(4) {
	case 0:
		return Outcome{Status: StatusSuspended}
	case 1:
		return Outcome{Status: StatusCompleted, Result: `"r"`, HasRes: true}
	case 2:
		return Outcome{Status: StatusCompleted}
	}
	return Outcome{Status: StatusFailed, Error: &ErrorInfo{Name: "E", Message: "m", Cause: &ErrorInfo{Name: "C"}}}
}

func (g *gen) next() Command {
	g.now += int64(g.rng.IntN(3)) * 1000
	c := Command{Now: g.now, Kind: genKinds[g.rng.IntN(len(genKinds))], ExecutionID: g.id()}
	switch c.Kind {
	case KindAdmit:
		c.WorkflowID = "w"
		c.Generated = g.rng.IntN(4) == 0
		if id, ok := g.occurrenceID(); ok && g.rng.IntN(6) == 0 {
			c.ExecutionID, c.Generated = id, false // a caller admits an occurrence's ID first
		}
		if g.rng.IntN(2) == 0 {
			c.Params, c.HasParams = `{"n":1}`, true
		}
		if g.rng.IntN(2) == 0 {
			c.Context = &[]KV{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}
		}
		if g.rng.IntN(3) == 0 {
			c.MaxAttempts = 1 + g.rng.IntN(3)
		}
		c.Queue = g.queue()
		if g.rng.IntN(3) == 0 {
			c.Priority = []int{PriorityFirst, 2, PriorityDefault, 4, PriorityLast}[g.rng.IntN(5)]
		}
		if g.rng.IntN(4) == 0 {
			c.Deadline = g.now + int64(1+g.rng.IntN(8))*1000
		}
		if g.rng.IntN(2) == 0 {
			c.ConcurrencyKey = []string{"k0", "k1"}[g.rng.IntN(2)]
		}
	case KindWake:
		c.At = g.now + int64(g.rng.IntN(5)-2)*1000
		if c.At <= 0 {
			c.At = 1
		}
	case KindClaim:
		c.ExecutionID = ""
		c.Limit = 1 + g.rng.IntN(4)
		c.Duration = int64(1+g.rng.IntN(3)) * 1000
		if k := g.rng.IntN(6); k < 3 {
			// A request key, among three: mostly with its own arguments (a
			// repeat), at times with others (a mismatch).
			c.RequestKey = fmt.Sprintf("q%d", k)
			if g.rng.IntN(5) > 0 {
				c.Limit, c.Duration = 1+k, int64(1+k)*1000
			}
		}
		c.Queues = g.claimQueues()
	case KindRenew, KindRelease:
		c.Token = g.token()
		c.Duration = int64(g.rng.IntN(3)) * 1000
		if c.Kind == KindRenew {
			c.Duration += 1000
		} else if g.rng.IntN(2) == 0 {
			c.Cause = &ErrorInfo{Name: "E", Message: "release", Code: "X", Cause: &ErrorInfo{Name: "C"}}
		}
	case KindAcknowledge:
		c.Token = g.token()
		c.Outcome = g.outcome()
	case KindAcknowledgeBatch:
		c.ExecutionID = ""
		c.Acks = make([]Ack, 1+g.rng.IntN(4)) // the same execution twice at times
		for i := range c.Acks {
			c.Acks[i] = Ack{ExecutionID: g.id(), Token: g.token(), Outcome: g.outcome()}
		}
	case KindSaveStep:
		c.Token, c.Key, c.Value = g.token(), g.key(), `1`
	case KindStart:
		c.Token, c.Key, c.WorkflowID = g.token(), g.key(), "child"
		c.ChildID = fmt.Sprintf("e%d", 6+g.rng.IntN(8)) // sometimes taken
		if g.rng.IntN(2) == 0 {
			c.Params, c.HasParams = []string{`{"a":1,"b":2}`, `{"b":2, "a":1}`, `{"a":2}`}[g.rng.IntN(3)], true
		}
		c.Queue = g.queue()
		if g.rng.IntN(4) == 0 {
			c.Deadline = g.now + int64(1+g.rng.IntN(8))*1000
		}
		if g.rng.IntN(3) == 0 {
			c.ConcurrencyKey = []string{"k0", "k1", "k2"}[g.rng.IntN(3)]
		}
	case KindCommit:
		c.ExecutionID = ""
		for i := g.rng.IntN(3); i > 0; i-- {
			w := Write{Key: g.key()}
			if g.rng.IntN(3) > 0 {
				w.Value, w.HasValue = `"v"`, true
			}
			c.Writes = append(c.Writes, w)
		}
	case KindWatch:
		c.Keys = []string{"k0", "k3"}[:1+g.rng.IntN(2)]
	case KindRetire:
		c.ExecutionID = ""
		c.At = max(1, g.now-int64(g.rng.IntN(4))*1000)
		c.Limit = 1 + g.rng.IntN(3)
	case KindCancel:
		c.Reason = []string{"", "customer cancelled"}[g.rng.IntN(2)]
	case KindForget:
		// Without an archive, a forget moves the cutoff or, with counts
		// it cannot hold, is refused (forget_test.go has an archive).
		c.ExecutionID = ""
		c.At = max(1, g.now-int64(g.rng.IntN(4))*1000)
		if g.rng.IntN(3) == 0 {
			c.Forgotten = []ForgetCount{{WorkflowID: "w", Status: StatusCompleted, N: 1}}
		}
	case KindPutQueue:
		c.ExecutionID = ""
		st := &QueueSettings{Name: g.queueName(), Concurrency: g.rng.IntN(4), Paused: g.rng.IntN(4) == 0}
		if g.rng.IntN(2) == 0 {
			// A millisecond is about a thousand commands of gen's.
			st.Rate, st.Period = 1+g.rng.IntN(3), MinRatePeriod*int64(1+g.rng.IntN(2))
		}
		if g.rng.IntN(3) > 0 {
			st.KeyLimit, st.KeyLive = 1+g.rng.IntN(6)/5, g.rng.IntN(2) == 0
		}
		if st.Concurrency == 0 && st.Rate == 0 && st.KeyLimit == 0 {
			st.Paused = true
		}
		c.QueueSettings, c.Limit = st, 3 // four names: the fourth put may be over the limit
	case KindDeleteQueue:
		c.ExecutionID, c.Queue = "", g.queueName()
	case KindExpireDeadlines:
		c.ExecutionID, c.Limit = "", 1+g.rng.IntN(3)
	case KindPutSchedule, KindDeleteSchedule, KindFireSchedules:
		c.ExecutionID = ""
		g.scheduleCommand(&c) // schedule_test.go
	}
	return c
}

// genKinds are the kinds gen chooses from, each equally often: every kind.
var genKinds = Kinds()

func (g *gen) observe(r Result) {
	for _, l := range r.Leases {
		g.tokens = append(g.tokens, l.Token)
	}
	if r.Schedule != nil {
		g.scheds.put(r.Schedule)
	}
}

func TestRandomCommandsKeepTheInvariantsAndPrecheckAgreesWithApply(t *testing.T) {
	for seed := uint64(1); seed <= seeds(40); seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 1)), now: 1000}
		s := New()
		for i := 0; i < 400; i++ {
			c := g.next()
			if err := c.Check(); err != nil {
				t.Fatalf("seed %d op %d: generated an invalid command: %v", seed, i, err)
			}
			before := dumpOf(s)
			pre, mutates := s.Precheck(&c)
			if now := dumpOf(s); !reflect.DeepEqual(before, now) {
				t.Fatalf("seed %d op %d: Precheck(%v) changed the state:\n%s", seed, i, c.Kind, cmp.Diff(before, now, cmpOpts))
			}
			r := s.Apply(&c)
			g.observe(r)
			if !mutates {
				after := dumpOf(s)
				after.Meta.Now = before.Meta.Now // Apply advances time even for no-ops
				if !reflect.DeepEqual(before, after) {
					t.Fatalf("seed %d op %d: Precheck said %v changes nothing, Apply changed:\n%s", seed, i, c.Kind, cmp.Diff(before, after, cmpOpts))
				}
				if !reflect.DeepEqual(pre, r) {
					t.Fatalf("seed %d op %d: Precheck and Apply disagree on %v:\n%s", seed, i, c.Kind, cmp.Diff(pre, r, cmpOpts))
				}
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatalf("seed %d op %d (%v): %v", seed, i, c.Kind, err)
			}
		}
	}
}

// An acknowledge-batch command must be exactly its acknowledgements applied
// one after the other as acknowledge commands: same state, same results.
func TestAcknowledgeBatchIsItsAcknowledgementsInOrder(t *testing.T) {
	for seed := uint64(1); seed <= seeds(40); seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 3)), now: 1000}
		batched, single := New(), New()
		for i := 0; i < 400; i++ {
			c := g.next()
			if c.Kind != KindAcknowledgeBatch {
				g.observe(batched.Apply(&c))
				single.Apply(&c)
				continue
			}
			got := batched.Apply(&c)
			var want Result
			for _, a := range c.Acks {
				one := Command{Kind: KindAcknowledge, Now: c.Now, ExecutionID: a.ExecutionID, Token: a.Token, Outcome: a.Outcome}
				r := single.Apply(&one)
				want.Acks = append(want.Acks, r)
				want.Became.Due = want.Became.Due || r.Became.Due
				want.Became.Terminal = want.Became.Terminal || r.Became.Terminal
			}
			if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
				t.Fatalf("seed %d op %d: results differ (-one by one +batched):\n%s", seed, i, diff)
			}
			if diff := cmp.Diff(dumpOf(single), dumpOf(batched), cmpOpts); diff != "" {
				t.Fatalf("seed %d op %d: states differ (-one by one +batched):\n%s", seed, i, diff)
			}
		}
	}
}

func TestApplyIsDeterministic(t *testing.T) {
	g := &gen{rng: rand.New(rand.NewPCG(99, 2)), now: 1000}
	var cmds []Command
	a := New()
	var results []Result
	for i := 0; i < 2000; i++ {
		c := g.next()
		cmds = append(cmds, c)
		r := a.Apply(&c)
		g.observe(r)
		results = append(results, r)
	}
	// Replay from encoded bytes, as recovery does.
	b := New()
	for i := range cmds {
		c, err := Decode(AppendEncode(nil, &cmds[i]))
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		if diff := cmp.Diff(results[i], b.Apply(c), cmpOpts); diff != "" {
			t.Fatalf("op %d (%v): replayed result differs:\n%s", i, c.Kind, diff)
		}
	}
	if diff := cmp.Diff(dumpOf(a), dumpOf(b), cmpOpts); diff != "" {
		t.Fatalf("replayed state differs:\n%s", diff)
	}
}

func TestCopyIsAnIndependentPointInTimeState(t *testing.T) {
	for seed := uint64(1); seed <= seeds(20); seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 5)), now: 1000}
		s := New()
		for i := 0; i < 300; i++ {
			c := g.next()
			g.observe(s.Apply(&c))
		}
		snap := s.Copy()
		frozen := dumpOf(snap)
		for i := 0; i < 300; i++ {
			c := g.next()
			g.observe(s.Apply(&c))
		}
		if diff := cmp.Diff(frozen, dumpOf(snap), cmpOpts); diff != "" {
			t.Fatalf("seed %d: the copy changed when the original did:\n%s", seed, diff)
		}
		// The copy's derived indexes and key bookkeeping still agree with
		// its records: the original changed nothing they share in place.
		if err := snap.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: the copy: %v", seed, err)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: the original: %v", seed, err)
		}
	}
}

func TestCheckInvariantsFindsBrokenIndexes(t *testing.T) {
	build := func() *State {
		s := New()
		s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "a", WorkflowID: "w"})
		s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "b", WorkflowID: "w"})
		s.Apply(&Command{Kind: KindWatch, Now: 10, ExecutionID: "b", Keys: []string{"k"}})
		return s
	}
	breaks := map[string]func(s *State){
		"due entry missing": func(s *State) { s.queues["w"].lanes[0].due.Delete(claimKey{At: 10, e: s.lookup("a")}) },
		"stale due entry":   func(s *State) { s.queues["w"].lanes[0].due.Set(claimKey{At: 99, e: s.lookup("a")}) },
		"due entry points elsewhere": func(s *State) {
			e := s.lookup("a").Value()
			s.queues["w"].lanes[0].due.Set(claimKey{At: 10, e: record.New(&e, s.gen)})
		},
		"due entry in another queue": func(s *State) {
			q := s.queueNamed("other")
			q.live++
			k := claimKey{At: 10, e: s.lookup("a")}
			s.queues["w"].lanes[0].due.Delete(k)
			q.lanes[0].due.Set(k)
		},
		"due entry in another priority's lane": func(s *State) {
			k := claimKey{At: 10, e: s.lookup("a")}
			s.queues["w"].lanes[0].due.Delete(k)
			s.queues["w"].lane(PriorityFirst).due.Set(k)
		},
		"priority kept for no record":            func(s *State) { s.setPriority("nobody", PriorityFirst) },
		"queue counts a live execution too many": func(s *State) { s.queues["w"].live++ },
		"queue without live executions":          func(s *State) { s.queueNamed("empty") },
		"terminal with wake": func(s *State) {
			rewrite(s.lookup("a"), func(e *Execution) {
				e.Status = StatusCompleted
				e.Outcome = &Outcome{Status: StatusCompleted}
			})
		},
		"token behind":            func(s *State) { rewrite(s.lookup("a"), func(e *Execution) { e.LeaseToken = 3 }) },
		"indexed wrongly":         func(s *State) { s.execs.Set(execItem{ID: "c", no: s.lookup("a").AdmitNo()}) },
		"indexed under no record": func(s *State) { s.execs.Set(execItem{ID: "a", no: 1 << 40}) },
		"watch index missing":     func(s *State) { s.wkeys.Delete(watchKey{Key: "k", ID: 1}) },
		"orphan step":             func(s *State) { s.steps.Set(stepEntry{ExecutionID: "zz", Key: "k"}) },
		"terminal count":          func(s *State) { s.meta.Terminal = 5 },
		"listing slot emptied": func(s *State) {
			s.list.adm.t.Chunk(0).Put(s.lookup("a").AdmitNo(), nil, 0, s.gen)
		},
		"listing slot under another status": func(s *State) {
			c, no := s.list.adm.t.Chunk(0), s.lookup("a").AdmitNo()
			c.Put(no, c.Rec(no), StatusFailed, s.gen)
		},
		"listing slot points elsewhere": func(s *State) {
			e := s.lookup("a").Value()
			s.list.adm.set(record.New(&e, s.gen), s.gen)
		},
		"workflow entry missing": func(s *State) {
			wc, _ := s.list.workflows.Get(workflowCount{Name: "w"})
			p := chunk.NewPostings(wc.p.Total(), s.gen)
			p.Add(s.lookup("b").AdmitNo(), s.gen) // not a's
			wc.p = p
			s.list.workflows.Set(wc)
		},
		"change missing": func(s *State) {
			c, _ := s.list.feed.chunks.Min()
			d := chunk.NewFeed(c.Lo(), c.Len(), s.gen)
			for i := 1; i < c.Len(); i++ {
				d.Append(c.Entry(i), s.gen)
			}
			s.list.feed.chunks.Set(d)
			s.list.feed.n--
		},
		"change sequence behind":             func(s *State) { s.meta.ChangeSeq = 1 },
		"admission number beyond the latest": func(s *State) { s.meta.Admitted = 1 },
		"status count":                       func(s *State) { s.list.counts[StatusFailed]++ },
		"workflow count": func(s *State) {
			wc, _ := s.list.workflows.Get(workflowCount{Name: "w"})
			wc.p.CountRecord(s.gen)
		},
		"change log over its bound": func(s *State) {
			// A sweep that never runs: the changes of twenty executions that
			// came and went stay in the log.
			s.TrackRetirement()
			s.list.feed.sizes = Sizes{FeedChunk: 4, FeedSweep: 1000}
			for i := range 20 {
				id := fmt.Sprintf("x%d", i)
				s.Apply(&Command{Kind: KindAdmit, Now: 11, ExecutionID: id, WorkflowID: "w"})
				s.Apply(&Command{Kind: KindCancel, Now: 11, ExecutionID: id})
			}
			s.Apply(&Command{Kind: KindRetire, Now: 12, At: 12, Limit: 20})
			s.list.feed.sizes = Sizes{FeedChunk: 4, FeedSweep: 1}
		},
	}
	if err := build().CheckInvariants(); err != nil {
		t.Fatalf("intact state: %v", err)
	}
	for name, breakIt := range breaks {
		s := build()
		breakIt(s)
		if err := s.CheckInvariants(); err == nil {
			t.Errorf("%s: not detected", name)
		}
	}
}

// The state machine must stay pure: no clocks, randomness, goroutine
// synchronisation, logging, files or network. We check the packages we write
// (fsm and the module's packages it imports) and the third-party ones we
// chose; the standard library's own internals are trusted. tidwall/btree
// imports sync for optional locking, which the state turns off (NoLocks).
func TestFSMImportsNothingImpure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}: {{join .Imports \" \"}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{"os", "sync", "sync/atomic", "time", "math/rand", "math/rand/v2", "crypto/rand",
		"log", "log/slog", "net", "net/http", "fmt", "io", "io/fs", "syscall", "unsafe", "runtime", "reflect", "os/exec"}
	allowed := map[string]map[string]bool{"github.com/tidwall/btree": {"sync": true, "sync/atomic": true}}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue // a standard-library package
		}
		pkg, imports, _ := strings.Cut(line, ": ")
		checked++
		for _, imp := range strings.Fields(imports) {
			for _, bad := range forbidden {
				if imp == bad && !allowed[pkg][imp] {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
	if checked < 2 {
		t.Fatalf("checked only %d packages: the go list output was not understood:\n%s", checked, out)
	}
}

// Backlog counts what a claim at a time would take (due wakes, expired
// leases) by positions in the indexes, and Upcoming lists the claimable
// executions in claim order: both agree with a walk of the records.
func TestBacklogAndUpcomingAgreeWithAWalkOfTheRecords(t *testing.T) {
	var seen [3]bool // some due, some leases, some expired: a test that tests something
	for seed := uint64(1); seed <= 20; seed++ {
		s := randomState(seed, 400)
		now := s.meta.Now
		for _, at := range []int64{0, now / 2, now, now + 1e9, 1 << 62} {
			var due, leases, expired int
			var want []string
			type cand struct {
				at int64
				id string
			}
			var cands []cand
			parked := parkedByRecords(s) // in no claimable index: neither counted nor listed
			s.execs.Scan(func(it execItem) bool {
				e := s.rec(it)
				a, ok := e.ClaimableAt()
				ok = ok && !parked[e.ID()]
				switch {
				case !ok:
				case e.Leased():
					leases++
					if a <= at {
						expired++
					}
				case a <= at:
					due++
				}
				if ok {
					cands = append(cands, cand{a, e.ID()})
				}
				return true
			})
			slices.SortFunc(cands, func(a, b cand) int {
				if a.at != b.at {
					return int(min(max(a.at-b.at, -1), 1))
				}
				return strings.Compare(a.id, b.id)
			})
			for i := 0; i < len(cands) && i < 7; i++ {
				want = append(want, cands[i].id)
			}
			d, l, x := s.Backlog(at)
			seen[0], seen[1], seen[2] = seen[0] || due > 0, seen[1] || leases > 0, seen[2] || expired > 0
			if d != due || l != leases || x != expired {
				t.Fatalf("seed %d at %d: Backlog %d %d %d, records say %d %d %d", seed, at, d, l, x, due, leases, expired)
			}
			var got []string
			s.Upcoming(7, func(_ int64, id string, _ bool) bool { got = append(got, id); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d: Upcoming %v, want %v", seed, got, want)
			}
		}
	}
	if seen != [3]bool{true, true, true} {
		t.Fatalf("due, leases, expired seen: %v", seen)
	}
}

// ApplyWith gives the results Apply gives, building a claim's leases and an
// acknowledge-batch's results in the lent buffers when they have room (and
// in new ones, handed back in the buffers, when they do not).
func TestApplyWithIsApplyBuildingResultsInTheLentBuffers(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 3)), now: 1000}
		plain, lent := New(), New()
		var buf Buffers
		if seed%2 == 0 {
			buf = Buffers{Leases: make([]Lease, 0, 2), Acks: make([]Result, 1)} // often too small
		}
		for i := 0; i < 400; i++ {
			c := g.next()
			want := plain.Apply(&c)
			got := lent.ApplyWith(&c, &buf)
			g.observe(want)
			if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
				t.Fatalf("seed %d op %d: results differ (-Apply +ApplyWith):\n%s", seed, i, diff)
			}
			if len(got.Leases) > 0 && &got.Leases[0] != &buf.Leases[:1][0] {
				t.Fatalf("seed %d op %d: a claim's leases are not in the buffer", seed, i)
			}
			if c.Kind == KindAcknowledgeBatch && len(got.Acks) > 0 && &got.Acks[0] != &buf.Acks[0] {
				t.Fatalf("seed %d op %d: an acknowledge-batch's results are not in the buffer", seed, i)
			}
		}
		if diff := cmp.Diff(dumpOf(plain), dumpOf(lent), cmpOpts); diff != "" {
			t.Fatalf("seed %d: states differ:\n%s", seed, diff)
		}
	}
}

// rewrite changes a stored record in place, as no command may: for tests
// that break a state on purpose. (record.Put with exclusive set is the one
// write path, and the caller vouches that no copy sees the record.)
func rewrite(st *stored, change func(e *Execution)) {
	v := st.Value()
	change(&v)
	record.Put(st, &v, 0, true)
}
