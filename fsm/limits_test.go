package fsm_test

import (
	"strconv"
	"testing"

	"github.com/execstore/execstore/fsm"
)

// An execution keeps at most MaxStepsPerExecution saved steps: one more is
// refused with CodeLimitExceeded and changes nothing, and a step already
// saved is still found (the first value wins, so saving it again adds
// nothing).
func TestAnExecutionSavesAtMostMaxStepsPerExecutionSteps(t *testing.T) {
	s := fsm.New()
	s.Apply(&fsm.Command{Kind: fsm.KindAdmit, Now: 1, ExecutionID: "e", WorkflowID: "w"})
	l := s.Apply(&fsm.Command{Kind: fsm.KindClaim, Now: 1, Limit: 1, Duration: 1e9}).Leases[0]
	save := func(key string) fsm.Result {
		return s.Apply(&fsm.Command{Kind: fsm.KindSaveStep, Now: 1, ExecutionID: "e", Token: l.Token, Key: key, Value: "1"})
	}
	for i := range fsm.MaxStepsPerExecution {
		if r := save(strconv.Itoa(i)); r.Code != fsm.CodeOK {
			t.Fatalf("step %d: code %v", i, r.Code)
		}
	}
	if _, mutates := s.Precheck(&fsm.Command{Kind: fsm.KindSaveStep, Now: 1, ExecutionID: "e", Token: l.Token, Key: "one more", Value: "1"}); mutates {
		t.Fatal("Precheck says a step past the limit would change the state")
	}
	if r := save("one more"); r.Code != fsm.CodeLimitExceeded {
		t.Fatalf("step %d: code %v, want CodeLimitExceeded", fsm.MaxStepsPerExecution+1, r.Code)
	}
	if _, ok := s.Step("e", "one more"); ok {
		t.Fatal("the refused step was saved")
	}
	if r := save("0"); r.Code != fsm.CodeOK {
		t.Fatalf("saving a saved step again at the limit: code %v", r.Code)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
