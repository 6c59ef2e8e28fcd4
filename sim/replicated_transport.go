package sim

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// delayTransport is raft's in-memory transport with the world's message
// delays: every message from or to the slow node waits a seeded time before
// it is sent (longer than a heartbeat timeout, it is as good as held). It
// refuses pipelining, so that every append passes through the wait, and
// counts the snapshots it sends. Links are made and cut on the in-memory
// transport underneath (Connect takes only *raft.InmemTransport).
type delayTransport struct {
	*raft.InmemTransport
	w         *replWorld
	from      int // the sending node's index
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ raft.Transport   = (*delayTransport)(nil)
	_ raft.WithClose   = (*delayTransport)(nil)
	_ raft.WithPreVote = (*delayTransport)(nil)
)

// hold waits the message's delay, or until the transport is closed.
func (t *delayTransport) hold(target raft.ServerAddress) {
	d := t.w.delayFor(t.from, target)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.done:
	}
}

// AppendEntriesPipeline refuses: raft then sends each append on its own,
// through AppendEntries and its delay.
func (t *delayTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *delayTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	t.hold(target)
	return t.InmemTransport.AppendEntries(id, target, args, resp)
}

func (t *delayTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	t.hold(target)
	return t.InmemTransport.RequestVote(id, target, args, resp)
}

func (t *delayTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	t.hold(target)
	return t.InmemTransport.RequestPreVote(id, target, args, resp)
}

func (t *delayTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	t.w.noteInstall(target)
	t.hold(target)
	return t.InmemTransport.InstallSnapshot(id, target, args, resp, data)
}

func (t *delayTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	t.hold(target)
	return t.InmemTransport.TimeoutNow(id, target, args, resp)
}

// Close ends the waits in progress and closes the in-memory transport.
func (t *delayTransport) Close() error {
	t.closeOnce.Do(func() { close(t.done) })
	return t.InmemTransport.Close()
}
