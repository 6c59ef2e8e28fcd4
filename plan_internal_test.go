package execstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/execstore/execstore/fsm"
)

// encodedState is st's snapshot encoding: equal encodings, equal states.
func encodedState(t *testing.T, st *fsm.State) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := st.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func planRequest(c fsm.Command) *request {
	r := &request{cmd: c, done: make(chan struct{}, 1)}
	r.size = fsm.EncodedLen(&r.cmd)
	return r
}

// A plan sorts a batch into what is answered from the state now, what is
// logged (acknowledgements in a row sharing an entry), what waits for the
// logged commands to be applied and what of the writer's own finds nothing
// to do, stamping each command with the batch's time, and changes nothing
// in the state it plans against.
func TestAPlanSortsABatchAndChangesNothing(t *testing.T) {
	st := fsm.New()
	for _, id := range []string{"old", "x", "y"} {
		st.Apply(&fsm.Command{Kind: fsm.KindAdmit, Now: 10, ExecutionID: id, WorkflowID: "w"})
	}
	claim := st.Apply(&fsm.Command{Kind: fsm.KindClaim, Now: 20, Limit: 3, Duration: 1000})
	token := map[string]uint64{}
	for _, l := range claim.Leases {
		token[l.ExecutionID] = l.Token
	}
	before := encodedState(t, st)

	dup := planRequest(fsm.Command{Kind: fsm.KindAdmit, ExecutionID: "old", WorkflowID: "w"})
	fresh := planRequest(fsm.Command{Kind: fsm.KindAdmit, ExecutionID: "new", WorkflowID: "w"})
	again := planRequest(fsm.Command{Kind: fsm.KindAdmit, ExecutionID: "new", WorkflowID: "w"})
	ackX := planRequest(fsm.Command{Kind: fsm.KindAcknowledge, ExecutionID: "x", Token: token["x"], Outcome: fsm.Outcome{Status: fsm.StatusCompleted}})
	ackY := planRequest(fsm.Command{Kind: fsm.KindAcknowledge, ExecutionID: "y", Token: token["y"], Outcome: fsm.Outcome{Status: fsm.StatusCompleted}})
	idle := planRequest(fsm.Command{Kind: fsm.KindFireSchedules})
	idle.fill = func(c *fsm.Command, _ *fsm.State) bool { return false }
	batch := []*request{dup, fresh, again, ackX, ackY, idle}

	var pl planner
	p := pl.plan(batch, st, 30, nil)
	if !bytes.Equal(encodedState(t, st), before) {
		t.Fatal("planning changed the state")
	}
	same := func(what string, got []*request, want ...*request) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d requests, want %d", what, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: request %d is %s %q", what, i, got[i].cmd.Kind, got[i].cmd.ExecutionID)
			}
		}
	}
	same("answered", p.answered, dup)
	same("logged", p.logged, fresh, ackX, ackY)
	same("deferred", p.deferred, again)
	same("idle", p.idle, idle)
	if dup.res.Code != fsm.CodeConflict {
		t.Fatalf("the duplicate's answer is %v, want a conflict", dup.res.Code)
	}
	if len(p.entries) != 2 || len(p.entries[1].reqs) != 2 || p.entries[1].command().Kind != fsm.KindAcknowledgeBatch {
		t.Fatalf("entries %+v: want the admission alone and the two acknowledgements in one", p.entries)
	}
	for _, r := range batch[:5] {
		if r.cmd.Now != 30 {
			t.Fatalf("%s %q stamped %d, want 30", r.cmd.Kind, r.cmd.ExecutionID, r.cmd.Now)
		}
	}

	// A failed store answers every request with its failure.
	failure := errors.New("disk gone")
	for _, r := range batch {
		r.err, r.res = nil, fsm.Result{}
	}
	p = pl.plan(batch[:5], st, 40, failure)
	same("answered after a failure", p.answered, batch[:5]...)
	for _, r := range p.answered {
		if r.err != failure {
			t.Fatalf("%s %q: err %v, want the failure", r.cmd.Kind, r.cmd.ExecutionID, r.err)
		}
	}
}
