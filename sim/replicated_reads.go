package sim

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
)

// A read has no side effect, so a read that does not answer is never an
// allowed unknown outcome once the cluster is healthy: it is a node that
// cannot serve. The clients' calls during a phase run under faults, where a
// timed-out read is left out of the history; the probe below runs after
// the phase healed, when nothing excuses one.
//
// It is a rolling restart, as an operator does one: every node in turn is
// (in every other phase) snapshotted and restarted, so that it opens on a
// snapshot with no log after it, then made the leader by raft's leadership
// transfer, and must answer a linearizable read within replReadBound. A node
// that kept a stale applied index when it restored that snapshot answers a
// read only after the next write, which a quiet cluster never makes.

// replReadBound bounds a read on a healthy cluster's leader: a round of
// heartbeats and the wait for its own applied index.
const replReadBound = replCallBound

// probeReads runs the probe after phase p healed.
func (w *replWorld) probeReads(p int) {
	restart := p%2 == 1
	for _, nd := range w.nodes {
		if w.violation() != nil {
			return
		}
		if restart && nd.node() != nil {
			if w.restartOnSnapshot(nd) == nil {
				return
			}
		}
		s := w.makeLeader(nd)
		if s == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), replReadBound)
		_, err := s.Get(ctx, "x0-0")
		cancel()
		switch code := execstore.ErrorCode(err); {
		case err == nil, code == codeNotFound:
			w.reads.answered++
		case refused(err), errors.Is(err, execstore.ErrNotLeader):
			w.reads.moved++ // the leadership moved on meanwhile: no answer was owed
		default:
			w.violate(violationf("a linearizable read on the leader %s did not answer within %v in a healthy cluster: %v",
				nd.id, replReadBound, err))
			return
		}
	}
}

// restartOnSnapshot takes a raft snapshot of a node, then stops it (a leader
// hands its leadership over first) and opens it again on its directory. It
// returns the node's new store; nil (and a violation) when it does not open.
func (w *replWorld) restartOnSnapshot(nd *replNode) *execstore.Store {
	if n := nd.node(); n != nil {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Bound)
		// Nothing new to snapshot is fine: the latest snapshot is at the last log.
		if err := n.Snapshot(ctx); err != nil && !errors.Is(err, errNothingNew) {
			w.reads.noSnapshot++
		}
		cancel()
	}
	w.crash(nd, false)
	if err := w.open(nd, nil); err != nil {
		w.violate(violationf("%v", err))
		return nil
	}
	w.reads.restarts++
	return nd.store.Load()
}

// makeLeader hands the leadership to nd, within the bound, and returns nd's
// store once it leads; nil when raft would not hand it over in time (a
// node that cannot lead is counted, not a violation: a transfer is raft's
// best effort), and nil with a violation when no node leads at all.
func (w *replWorld) makeLeader(nd *replNode) *execstore.Store {
	deadline := time.Now().Add(w.cfg.Bound)
	for time.Now().Before(deadline) {
		ld := w.awaitLeader()
		if ld == nil {
			w.violate(violationf("no leader within %v in a healthy cluster", w.cfg.Bound))
			return nil
		}
		if ld == nd {
			w.reads.transfers++
			return nd.store.Load()
		}
		if n := ld.node(); n != nil {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			_ = n.TransferLeadership(ctx, nd.id) // refused or failed: look again
			cancel()
		}
		time.Sleep(replPoll)
	}
	w.reads.notLed++
	return nil
}

// readProbe counts what the probes did.
type readProbe struct {
	answered, moved, restarts, transfers, notLed, noSnapshot int
}

// errNothingNew is raft's answer to a snapshot with no log applied since
// the last one.
var errNothingNew = raft.ErrNothingNewToSnapshot
