package sim

import (
	"cmp"
	"slices"
	"strings"

	"github.com/execstore/execstore"
)

// Concurrency keys in the model, from API.md's words and not from the state
// machine's bookkeeping: in a queue with a key limit n, an execution with a
// key holds one of its key's slots while leased (KeyLeased) or from its
// first lease until it ends (KeyLive); of a key's executions that need a
// slot and have a pending wake, the first n minus the holders in (due time,
// ID) order may be claimed, and the rest wait, parked, whatever their
// priority. The model works it out from every record at every claim.

// simKeys are the concurrency keys the workload admits with.
var simKeys = []string{"cust-1", "cust-2", "cust-3"}

// keyParked returns the executions that wait parked for a slot of their key.
func (m *model) keyParked() map[string]bool {
	if len(m.qsettings) == 0 {
		return nil
	}
	type group struct {
		holders int
		waiting []*mexec
	}
	var groups map[[2]string]*group
	for _, id := range m.order {
		e := m.execs[id]
		st := m.qsettings[e.queueName()]
		if e.ckey == "" || st.KeyLimit == 0 || e.terminal() {
			continue
		}
		if groups == nil {
			groups = map[[2]string]*group{}
		}
		k := [2]string{e.queueName(), e.ckey}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		switch {
		case e.token != 0 || (st.KeyMode == execstore.KeyLive && e.lastToken != 0):
			g.holders++
		case e.due != 0:
			g.waiting = append(g.waiting, e)
		}
	}
	var parked map[string]bool
	for k, g := range groups {
		slices.SortFunc(g.waiting, func(a, b *mexec) int {
			if c := cmp.Compare(a.due, b.due); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
		free := max(0, m.qsettings[k[0]].KeyLimit-g.holders)
		for _, e := range g.waiting[min(free, len(g.waiting)):] {
			if parked == nil {
				parked = map[string]bool{}
			}
			parked[e.id] = true
		}
	}
	return parked
}

// parkedIn counts a queue's parked executions.
func (m *model) parkedIn(queue string) int {
	n := 0
	for id := range m.keyParked() {
		if m.execs[id].queueName() == queue {
			n++
		}
	}
	return n
}
