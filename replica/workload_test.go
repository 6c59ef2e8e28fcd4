package replica

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/execstore/execstore/fsm"
)

// workload generates real commands of the state machine, as a store's writer would stamp
// them: admissions, claims, acknowledgements, saved steps, wakes and cancellations, each
// with a time that only grows. It learns lease tokens from the results it is shown, so its
// later commands act on real leases (and, when a result was lost, on stale ones: a lease
// lost is an answer too). Seeded: the same seed gives the same commands for the same
// results.
type workload struct {
	rng      *rand.Rand
	now      int64
	admitted int
	leases   []fsm.Lease
}

func newWorkload(seed uint64) *workload {
	return &workload{rng: rand.New(rand.NewPCG(seed, 13)), now: 1_000_000}
}

func (w *workload) id() string {
	if w.admitted == 0 {
		return "e0"
	}
	return fmt.Sprintf("e%d", w.rng.IntN(w.admitted))
}

// lease takes a known lease (it is used up by the command that gets it).
func (w *workload) lease() (fsm.Lease, bool) {
	if len(w.leases) == 0 {
		return fsm.Lease{}, false
	}
	i := w.rng.IntN(len(w.leases))
	l := w.leases[i]
	w.leases = append(w.leases[:i], w.leases[i+1:]...)
	return l, true
}

func (w *workload) next() fsm.Command {
	w.now += int64(w.rng.IntN(3)) * 1_000
	switch k := w.rng.IntN(10); {
	case k < 3 || w.admitted == 0:
		return w.admit()
	case k < 5:
		return fsm.Command{Kind: fsm.KindClaim, Now: w.now, Limit: 1 + w.rng.IntN(3), Duration: 30_000}
	case k < 7:
		if l, ok := w.lease(); ok {
			o := fsm.Outcome{Status: fsm.StatusCompleted, Result: `"done"`, HasRes: true}
			if w.rng.IntN(3) == 0 {
				o = fsm.Outcome{Status: fsm.StatusSuspended}
			}
			return fsm.Command{Kind: fsm.KindAcknowledge, Now: w.now, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: o}
		}
	case k < 8:
		if l, ok := w.lease(); ok {
			w.leases = append(w.leases, l) // a step keeps the lease
			return fsm.Command{Kind: fsm.KindSaveStep, Now: w.now, ExecutionID: l.ExecutionID, Token: l.Token,
				Key: fmt.Sprintf("step-%d", w.rng.IntN(4)), Value: `{"v":1}`}
		}
	case k < 9:
		return fsm.Command{Kind: fsm.KindWake, Now: w.now, ExecutionID: w.id(), At: w.now + int64(w.rng.IntN(5))*1_000}
	default:
		return fsm.Command{Kind: fsm.KindCancel, Now: w.now, ExecutionID: w.id(), Reason: "cancelled by the workload"}
	}
	return w.admit()
}

func (w *workload) admit() fsm.Command {
	c := fsm.Command{Kind: fsm.KindAdmit, Now: w.now, ExecutionID: fmt.Sprintf("e%d", w.admitted), WorkflowID: "wf",
		Params: fmt.Sprintf(`{"n":%d}`, w.admitted), HasParams: true}
	w.admitted++
	return c
}

// observe learns the leases a claim's result granted.
func (w *workload) observe(r fsm.Result) {
	w.leases = append(w.leases, r.Leases...)
}

func encodeCommand(t testing.TB, c *fsm.Command) []byte {
	t.Helper()
	if err := c.Check(); err != nil {
		t.Fatalf("the workload made an invalid command %v: %v", c.Kind, err)
	}
	return fsm.AppendEncode(nil, c)
}

func stateBytes(t testing.TB, st *fsm.State) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := st.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
