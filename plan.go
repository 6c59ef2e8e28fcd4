package execstore

import (
	"slices"

	"github.com/execstore/execstore/fsm"
)

// The writer plans each batch before anything is written, as etcd/raft's
// Ready says what to persist before it is sent: a pure function of the
// batch's requests, the applied state and the batch's time decides which
// requests change nothing and are answered from the state at once, which are
// logged (and how they share log entries), and which wait for the logged ones
// to be applied (see fsm.BatchView). A committer (committer.go) then carries the
// plan out: it logs the entries, applies them and answers.

// plan is what the writer decided for one batch.
type plan struct {
	now int64 // the batch's time, stamped on every command

	// answered: requests whose answer is already set (r.res, or r.err when
	// the store had failed), from the state as it was: nothing to log.
	answered []*request
	// logged: the requests to log, in order, grouped into entries.
	logged  []*request
	entries []logEntry
	// deferred: requests answered once the logged ones are applied; one
	// that turns out to change the state after all is queued again, to be
	// logged next (settle). See fsm.BatchView.
	deferred []*request
	// idle: the writer's own requests that found nothing to do at the
	// batch's time (a fire of schedules none of which is due any more).
	// They are neither commands nor answers to a caller: nothing counts them.
	idle []*request

	mergedAcks []fsm.Ack // backing store of the entries' merged acknowledge-batch commands
}

// logEntry is one logged command: one request's, or a run of consecutive
// acknowledge requests merged into one acknowledge-batch command (which
// applies each exactly as its own command would, with its own result), so
// that concurrent workers' acknowledgements cost one WAL entry, not one each.
type logEntry struct {
	reqs   []*request  // the requests it answers, in order
	merged fsm.Command // the acknowledge-batch command, when len(reqs) > 1
}

// size is an upper bound of the entry's encoded length: its requests'
// (a merged acknowledge-batch takes less).
func (e *logEntry) size() int {
	n := 0
	for _, r := range e.reqs {
		n += r.size
	}
	return n
}

func (e *logEntry) command() *fsm.Command {
	if len(e.reqs) == 1 {
		return &e.reqs[0].cmd
	}
	return &e.merged
}

// planner makes plans. It keeps one plan and one batch view, reused from
// batch to batch so that planning does not allocate: a plan is good until
// the next one is made. Writer goroutine only.
type planner struct {
	p    plan
	view fsm.BatchView
}

// plan plans a batch at time now against the applied state st. failed, when
// not nil, answers every request with that error (the store fail-stopped).
// It changes nothing but the requests' commands (stamped with now, and
// filled in by their fill) and answers, and the planner's own buffers.
func (pl *planner) plan(batch []*request, st *fsm.State, now int64, failed error) *plan {
	p := &pl.p
	p.reset(now)
	pl.view.Reset()
	for _, r := range batch {
		r.cmd.Now = now
		if r.fill != nil && !r.fill(&r.cmd, st) {
			p.idle = append(p.idle, r)
			continue
		}
		if r.cmd.Kind == fsm.KindPutSchedule {
			firstOccurrence(&r.cmd) // its first occurrence follows its time
		}
		if failed != nil {
			r.err = failed
			p.answered = append(p.answered, r)
			continue
		}
		res, mutates := st.Precheck(&r.cmd)
		switch {
		case !mutates:
			r.res = res
			p.answered = append(p.answered, r)
		case !r.logNext && pl.view.Settles(&r.cmd):
			p.deferred = append(p.deferred, r)
		default:
			pl.view.Note(&r.cmd, st)
			p.logged = append(p.logged, r)
		}
	}
	p.group()
	return p
}

// reset empties the plan for a batch at now, keeping its buffers.
func (p *plan) reset(now int64) {
	*p = plan{now: now, answered: p.answered[:0], logged: p.logged[:0], entries: p.entries[:0],
		deferred: p.deferred[:0], idle: p.idle[:0], mergedAcks: p.mergedAcks[:0]}
}

// group cuts the logged requests into entries: a request each, but runs of
// acknowledgements merged (at most what one acknowledge-batch command
// holds, ackRunLen).
func (p *plan) group() {
	p.mergedAcks = slices.Grow(p.mergedAcks, len(p.logged)) // never reallocated below
	for i := 0; i < len(p.logged); {
		j := i + 1
		if p.logged[i].cmd.Kind == fsm.KindAcknowledge {
			for j < len(p.logged) && p.logged[j].cmd.Kind == fsm.KindAcknowledge {
				j++
			}
			run := p.logged[i:j]
			j = i + ackRunLen(len(run), func(k int) (string, *fsm.Outcome) {
				return run[k].cmd.ExecutionID, &run[k].cmd.Outcome
			})
		}
		e := logEntry{reqs: p.logged[i:j]}
		if j-i > 1 {
			start := len(p.mergedAcks)
			for _, r := range e.reqs {
				p.mergedAcks = append(p.mergedAcks, fsm.Ack{ExecutionID: r.cmd.ExecutionID, Token: r.cmd.Token, Outcome: r.cmd.Outcome})
			}
			e.merged = fsm.Command{Kind: fsm.KindAcknowledgeBatch, Now: p.now, Acks: p.mergedAcks[start:len(p.mergedAcks):len(p.mergedAcks)]}
		}
		p.entries = append(p.entries, e)
		i = j
	}
}

// size is an upper bound of the plan's encoded entries.
func (p *plan) size() int {
	n := 0
	for _, r := range p.logged {
		n += r.size
	}
	return n
}

// done ends a plan once the committer answered it: it drops the plan's
// references to its callers' data, and its buffers after a large batch, so
// that one burst does not pin its memory for the life of the store.
func (pl *planner) done() {
	p := &pl.p
	clear(p.mergedAcks)
	clear(p.answered)
	clear(p.deferred)
	clear(p.idle)
	if cap(p.logged) > queueCapMax {
		p.logged, p.entries, p.mergedAcks = nil, nil, nil
	}
	if cap(p.deferred) > queueCapMax {
		p.deferred = nil
	}
	if cap(p.answered) > queueCapMax {
		p.answered = nil
	}
}

// settle answers a plan's deferred requests from the applied state st, and
// returns those that turn out to change it, marked to be logged next (never
// deferred twice). failed is as in plan.
func settle(deferred []*request, st *fsm.State, failed error, answer func(*request)) (again []*request) {
	for _, r := range deferred {
		if failed != nil {
			r.err = failed
			answer(r)
			continue
		}
		res, mutates := st.Precheck(&r.cmd)
		if !mutates {
			r.res = res
			answer(r)
			continue
		}
		r.logNext = true
		again = append(again, r)
	}
	return again
}
