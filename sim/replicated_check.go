package sim

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/replica"
	"github.com/execstore/execstore/wal"
)

// check heals the world, waits for it to settle, and checks what it holds
// and what the clients saw:
//
//   - after the faults heal, the cluster settles within the bound: a leader
//     takes a write and every node applies it;
//   - every node's state then encodes to the same bytes;
//   - nothing acknowledged is lost: every admission a client saw succeed
//     exists on every node, every outcome a client saw recorded is the
//     execution's outcome there, every step saved is there, and every
//     token handed out is at most the execution's last;
//   - along every node's log, the stamped times never go backwards (read
//     after each stop, see checkStamps);
//   - tokens never go backwards: a claim that began after another ended
//     got a greater token of the same execution, and no token was handed
//     out twice;
//   - no execution is leased twice at once: a lease granted before an
//     earlier one expired needs a call that ended the earlier one
//     (an acknowledgement or release under its token, or a cancellation,
//     that succeeded or whose outcome is unknown) made before it;
//   - the history is linearizable (porcupine, partitioned by execution).
//
// It returns the linearizability report.
func (w *replWorld) check() LinReport {
	w.heal()
	for _, nd := range w.nodes {
		nd.skew.Store(0)
	}
	if w.settle() == nil {
		return LinReport{}
	}
	w.checkIdentical()
	w.checkAcknowledged()
	w.closeAll()
	w.checkLeases()
	if w.violation() != nil {
		return LinReport{}
	}
	ops := w.hist.ops
	model := linModel
	model.Partition = partitionByID
	res, info := porcupine.CheckOperationsVerbose(model, ops, w.cfg.Timeout)
	switch res {
	case porcupine.Illegal:
		w.violate(violationf("the clients' history of %d operations (%d calls of unknown outcome) is not linearizable",
			len(ops), w.hist.unknown.Load()))
	case porcupine.Unknown:
		w.violate(violationf("porcupine did not decide within %v whether the clients' history of %d operations is linearizable",
			w.cfg.Timeout, len(ops)))
	}
	return LinReport{Operations: len(ops), Result: res, History: ops, Info: info}
}

// checkIdentical compares every running node's state, encoded.
func (w *replWorld) checkIdentical() {
	var want []byte
	var from string
	var wantLen int
	for _, nd := range w.nodes {
		n := nd.node()
		if n == nil {
			continue
		}
		st, applied := n.FSM().Copy()
		var b bytes.Buffer
		err := st.Encode(&b)
		records := st.Len()
		n.FSM().Release(st) // read no more of it: its node changes its records in place again
		if err != nil {
			w.violate(violationf("encoding %s's state: %v", nd.id, err))
			return
		}
		if want == nil {
			want, from, wantLen = b.Bytes(), nd.id, records
			continue
		}
		if !bytes.Equal(b.Bytes(), want) {
			w.violate(violationf("after the faults healed, %s's state (%d records, %d bytes, log %d applied) differs from %s's (%d records, %d bytes)",
				nd.id, records, b.Len(), applied, from, wantLen, len(want)))
			return
		}
	}
}

// checkAcknowledged looks, on every running node, for what the clients saw
// succeed.
func (w *replWorld) checkAcknowledged() {
	for _, nd := range w.nodes {
		n := nd.node()
		if n == nil {
			continue
		}
		n.FSM().View(func(st *fsm.State, _ uint64) {
			for _, op := range w.hist.ops {
				if msg := lostBy(st, op); msg != "" {
					w.violate(violationf("after the faults healed, %s %s", nd.id, msg))
					return
				}
			}
		})
	}
}

// lostBy says what of an answered operation st lost; "" when nothing.
func lostBy(st *fsm.State, op porcupine.Operation) string {
	in, out := op.Input.(linIn), op.Output.(linOut)
	if out.Unknown || out.Code != "" {
		return ""
	}
	e, ok := st.Get(in.ID)
	switch {
	case in.Kind == "get" || in.Kind == "step" || in.Kind == "claim" && out.Token == 0:
	case !ok:
		return fmt.Sprintf("has no execution %s, which an acknowledged %s found or made", in.ID, in.Kind)
	case (in.Kind == "ack" || in.Kind == "cancel") && out.Status.Terminal() && statusName(e.Status) != out.Status:
		return fmt.Sprintf("holds %s %s, after an acknowledged %s answered %s", in.ID, statusName(e.Status), in.Kind, out.Status)
	case in.Kind == "save":
		if _, found := st.Step(in.ID, "s"); !found {
			return "lost the step an acknowledged save-step saved for " + in.ID
		}
	case in.Kind == "claim" && out.Token > e.LastToken:
		return fmt.Sprintf("holds %s with last token %d, below the token %d a claim handed out", in.ID, e.LastToken, out.Token)
	}
	return ""
}

// grant is a lease a client got.
type grant struct {
	id          string
	token       uint64
	at, expires int64 // granted at (the store's time), expires at
	call, ret   int64
	client      int
}

// checkLeases checks the leases the clients got: tokens that grow, none
// handed out twice, none granted while an earlier one was live.
func (w *replWorld) checkLeases() {
	byID := map[string][]grant{}
	for _, op := range w.hist.ops {
		in, out := op.Input.(linIn), op.Output.(linOut)
		if in.Kind != "claim" || out.Unknown || out.Token == 0 {
			continue
		}
		byID[in.ID] = append(byID[in.ID], grant{id: in.ID, token: out.Token, at: out.Expires - in.Dur, expires: out.Expires,
			call: op.Call, ret: op.Return, client: op.ClientId})
	}
	for id, gs := range byID {
		sort.Slice(gs, func(i, j int) bool { return gs[i].token < gs[j].token })
		for i, a := range gs {
			for _, b := range gs[i+1:] {
				switch {
				case a.token == b.token:
					w.violate(violationf("token %d of %s was handed out twice (clients %d and %d)", a.token, id, a.client, b.client))
					return
				case b.ret < a.call:
					w.violate(violationf("%s: a claim got token %d after an earlier claim, finished before it began, got %d: tokens went backwards",
						id, a.token, b.token))
					return
				}
			}
			if i+1 < len(gs) {
				if b := gs[i+1]; b.at < a.expires && !w.ended(a, b) {
					w.violate(violationf("%s was leased with token %d at %v while token %d's lease, to %v, was live: no call ended it",
						id, b.token, simTime(time.Unix(0, b.at)), a.token, simTime(time.Unix(0, a.expires))))
					return
				}
			}
		}
	}
}

// ended reports whether some call that began before b was granted may have
// ended lease a: an acknowledgement or release under a's token, or a
// cancellation, that succeeded or whose outcome is unknown, or a renewal
// under a's token that moved its expiry to b's grant or before.
func (w *replWorld) ended(a, b grant) bool {
	for _, op := range w.hist.ops {
		in, out := op.Input.(linIn), op.Output.(linOut)
		if in.ID != a.id || op.Call > b.ret || !(out.Unknown || out.Code == "") {
			continue
		}
		expires := out.Expires
		if out.Unknown {
			expires = in.Now + in.Dur
		}
		switch {
		case in.Kind == "cancel":
			return true
		case in.Token != a.token:
		case in.Kind == "ack" || in.Kind == "release":
			return true
		case in.Kind == "renew" && expires <= b.at:
			return true
		}
	}
	return false
}

// checkStamps reads a stopped node's log: the commands' stamped times must
// never go backwards along it. Every leader stamps at or after the time of
// every log before its own in its log (it applies them before it stamps),
// so this holds along every node's log, uncommitted tails included.
func (w *replWorld) checkStamps(nd *replNode) {
	ls, err := replica.OpenLogStore(filepath.Join(nd.dir, "wal"), wal.Options{})
	if err != nil {
		w.violate(violationf("reading %s's log: %v", nd.id, err))
		return
	}
	defer ls.Close()
	first, _ := ls.FirstIndex()
	last, _ := ls.LastIndex()
	var prev int64
	var prevAt uint64
	for i := first; i > 0 && i <= last; i++ {
		var l raft.Log
		if err := ls.GetLog(i, &l); err != nil {
			w.violate(violationf("%s's log %d: %v", nd.id, i, err))
			return
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := replica.DecodeCommands(l.Data)
		if err != nil {
			w.violate(violationf("%s's log %d does not hold commands: %v", nd.id, i, err))
			return
		}
		for _, c := range cmds {
			if c.Now < prev {
				w.violate(violationf("%s's log %d (%v) is stamped %v, %v before log %d: the store's time went backwards",
					nd.id, i, c.Kind, simTime(time.Unix(0, c.Now)), time.Duration(prev-c.Now), prevAt))
				return
			}
			prev, prevAt = c.Now, i
		}
	}
}
