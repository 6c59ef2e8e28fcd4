//go:build invariants

package fsm

import (
	"strings"
	"testing"
)

// In the invariants build, a precheck whose handler writes before it decides
// panics, naming the kind; one that only decides does not.
func TestAPrecheckThatChangesTheStatePanicsInTheInvariantsBuild(t *testing.T) {
	st := New()
	st.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "e", WorkflowID: "w"})
	wake := &Command{Kind: KindWake, Now: 20, ExecutionID: "e", At: 5}
	if _, mutates := st.Precheck(wake); !mutates {
		t.Fatal("an earlier wake does not mutate")
	}

	saved := kinds[KindWake].apply
	defer func() { kinds[KindWake].apply = saved }()
	kinds[KindWake].apply = func(s *State, c *Command, now int64, _ bool) Result {
		return s.wake(c, now, false) // writes even when asked for a dry run
	}
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "precheck of a wake command changed the state") {
			t.Fatalf("recovered %v, want the precheck check's panic", r)
		}
	}()
	st.Precheck(wake)
	t.Fatal("a precheck that changed the state did not panic")
}
