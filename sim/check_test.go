package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/execstore/execstore"
)

// The check of a promise that a request writes nothing fails when the log
// moved, by an entry, a batch or an applied entry, and passes when it did
// not or when the store failed (the fail-stop checks judge that store).
func TestTheWroteNothingCheckFailsWhenTheLogMoved(t *testing.T) {
	before := execstore.Stats{WALLastIndex: 40, WALBatches: 12, AppliedIndex: 40}
	failed := errors.New("storage failed")
	cases := []struct {
		name  string
		after func(st *execstore.Stats)
		fails bool
	}{
		{"nothing moved", func(*execstore.Stats) {}, false},
		{"an entry more", func(st *execstore.Stats) { st.WALLastIndex++; st.AppliedIndex++; st.WALBatches++ }, true},
		{"a batch more", func(st *execstore.Stats) { st.WALBatches++ }, true},
		{"an applied entry more", func(st *execstore.Stats) { st.AppliedIndex++ }, true},
		{"an entry more on a failed store", func(st *execstore.Stats) { st.WALLastIndex++; st.Failed = failed }, false},
	}
	for _, c := range cases {
		after := before
		c.after(&after)
		err := wroteNothing(before, after)
		if (err != nil) != c.fails {
			t.Errorf("%s: wroteNothing says %v, want a failure: %v", c.name, err, c.fails)
		}
		if err != nil && !strings.Contains(err.Error(), "writes nothing") {
			t.Errorf("%s: the failure does not say what was promised: %v", c.name, err)
		}
	}
	before.Failed = failed
	if err := wroteNothing(before, before); err != nil {
		t.Errorf("a store that failed before the request is judged: %v", err)
	}
}

// The model marks what the contract promises writes nothing, and not what
// writes: a cancel of a running execution writes, a cancel of the same
// execution once terminal does not, nor does a cancel of an unknown one.
func TestTheModelSaysWhichRequestsWriteNothing(t *testing.T) {
	m := newModel(simLimits())
	steps := []struct {
		o     op
		quiet bool
	}{
		{op{kind: opAdmit, admit: admitArgs{id: "a", workflow: "wf", params: params{valid: true}, context: ctxArg{valid: true}}}, false},
		{op{kind: opAdmit, admit: admitArgs{id: "a", workflow: "wf", params: params{valid: true}, context: ctxArg{valid: true}}}, true},
		{op{kind: opCancel, id: "a"}, false},
		{op{kind: opCancel, id: "a"}, true},
		{op{kind: opCancel, id: "nobody"}, true},
		{op{kind: opClaim, limit: 1, dur: simLeaseDuration}, true},
		{op{kind: opGet, id: "a"}, true},
	}
	clock := simEpoch.UnixNano()
	for i, s := range steps {
		m.quiet, m.writerLogs = false, false
		r := s.o.apply(m, clock+int64(i), "")
		if m.quiet != s.quiet || m.writerLogs {
			t.Errorf("step %d, %s -> %+v: the model says quiet %v (writer logs %v), want %v", i, s.o.kind, r, m.quiet, m.writerLogs, s.quiet)
		}
	}
}
