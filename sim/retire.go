package sim

import (
	"math/rand/v2"
	"time"
)

// Retention in the simulator. A share of the seeds opens its stores with
// Options.Retention, on a clock whose timers never fire: the writer's
// retention check never fires and it retires, before each batch of requests
// it takes, every terminal execution last updated before the store's time
// less the retention. The model does the same when it stamps a write, before
// it reaches the schedules' occurrences, as the writer does. A retired execution keeps its
// ID, workflow, status, outcome, parent link, timestamps and attempts, and
// loses its params, context, saved steps, the record of the children it
// started and its admission's attempt bound; it is not listed, its change
// leaves the feed (retirement is not a change, so the feed's head stays), and
// Stats still counts it, among the retired too. Everything else about it
// (IDs never reused, wakes ignored, late acknowledgements answered with its
// outcome, Await) is what any terminal execution answers.

// retentions are the retentions a seed with retention may run with: short
// enough that the clock's ticks and leaps pass them many times in a run.
var retentions = []time.Duration{20 * time.Second, 90 * time.Second, 5 * time.Minute}

// retire is what the writer does before a batch: every terminal execution
// last updated before now less the retention loses what retention drops. It
// reports whether it retired any (the writer then logs retire commands).
func (m *model) retire(now int64) bool {
	if m.retention <= 0 {
		return false
	}
	retired := false
	cutoff := now - int64(m.retention)
	for _, id := range m.order {
		e := m.execs[id]
		if e.retired || !e.terminal() || e.updatedAt >= cutoff {
			continue
		}
		e.retired = true
		e.params, e.context, e.maxAttempts, e.queue, e.prio, e.ckey = nil, nil, 0, "", 0, ""
		e.steps, e.starts = map[string]string{}, map[string]mstart{}
		e.changeSeq = 0 // its change leaves the feed
		m.touch(id)
		retired = true
	}
	return retired
}

// forget is what the writer does after it retires: every retired (so
// archived) execution last updated before now less ForgetAfter is forgotten,
// as if it had never been admitted. It reports whether it forgot any (the
// writer then logs forget commands).
func (m *model) forget(now int64) bool {
	if m.forgetAfter <= 0 {
		return false
	}
	cutoff := now - int64(m.forgetAfter)
	kept := m.order[:0]
	for _, id := range m.order {
		if e := m.execs[id]; e.retired && e.updatedAt < cutoff {
			delete(m.execs, id)
			if m.forgotten == nil {
				m.forgotten = map[string]bool{}
			}
			m.forgotten[id] = true
			m.forgot++
			continue
		}
		kept = append(kept, id)
	}
	forgot := len(kept) < len(m.order)
	clear(m.order[len(kept):])
	m.order = kept
	return forgot
}

// retentionEdge moves the clock to exactly where a terminal execution's
// retention ends (not yet retired: the cutoff is exclusive) or a nanosecond
// past it (retired), makes a write that changes nothing (a wake of the
// terminal execution, ignored) so that the writer retires, and reads it.
func (w *world) retentionEdge() error {
	var ended []*mexec
	for _, id := range w.model.order {
		if e := w.model.execs[id]; e.terminal() && !e.retired {
			ended = append(ended, e)
		}
	}
	if len(ended) == 0 {
		return nil
	}
	e := ended[w.pick(len(ended))]
	at := e.updatedAt + int64(w.model.retention)
	if w.chance(50) {
		at++
		w.cover("boundary", "retention passed by a nanosecond")
	} else {
		w.cover("boundary", "retention reached exactly")
	}
	if at < w.clock.nanos() {
		return nil // the clock went back past it: the store's time decides
	}
	w.clock.set(at)
	w.tr.line("%d clock to the retention of %s: %s", w.ops, w.tr.alias(e.id), simTime(w.clock.Now()))
	if err := w.plain(&op{kind: opWake, id: e.id, at: w.clock.Now()}); err != nil {
		return err
	}
	return w.plain(&op{kind: opGet, id: e.id})
}

// retentionOf chooses whether a seed runs with retention, from a generator
// of its own so that the other seeds' runs are what they were.
func retentionOf(seed uint64) time.Duration {
	r := rand.New(rand.NewPCG(seed, 0x7e7a))
	if r.IntN(4) != 0 {
		return 0
	}
	return retentions[r.IntN(len(retentions))]
}

// archiveOf reports whether a seed with retention opens its stores with the
// archive too (Options.Archive): half of them, drawn from a generator of its
// own. An archiving store must answer exactly as one that keeps its retired
// records, so the seed's trace is what it is without the archive; only the
// records read back say Archived.
func archiveOf(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 0xa4c1)).IntN(2) == 0
}

// forgetOf chooses whether a seed that archives forgets too
// (Options.ForgetAfter), and after how long: half of them, three times
// their retention, drawn from a generator of its own.
func forgetOf(seed uint64, retention time.Duration) time.Duration {
	if rand.New(rand.NewPCG(seed, 0xf06e)).IntN(2) != 0 {
		return 0
	}
	return 3 * retention
}
