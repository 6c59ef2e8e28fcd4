package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/fsm"
)

// The replicated world's checks of what clients saw can fail: each broken
// history below is flagged, and each sound one passes.
func TestTheReplicatedLeaseChecksRejectBrokenHistories(t *testing.T) {
	minute := int64(time.Minute)
	claim := func(call, ret int64, token uint64, at int64) porcupine.Operation {
		return porcupine.Operation{Input: linIn{Kind: "claim", ID: "x", Now: at, Dur: minute}, Call: call, Return: ret,
			Output: linOut{Token: token, Expires: at + minute}}
	}
	end := func(kind string, call int64, token uint64, out linOut) porcupine.Operation {
		return porcupine.Operation{Input: linIn{Kind: kind, ID: "x", Token: token}, Call: call, Return: call + 1, Output: out}
	}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    string // in the violation; "" for none
	}{
		{"a token handed out twice", []porcupine.Operation{claim(1, 2, 1, 0), claim(3, 4, 1, minute)}, "handed out twice"},
		{"a token that went backwards", []porcupine.Operation{claim(1, 2, 2, 0), claim(3, 4, 1, minute)}, "went backwards"},
		{"a lease granted while another was live", []porcupine.Operation{claim(1, 2, 1, 0), claim(3, 4, 2, 1)}, "was live"},
		{"a lease granted after an acknowledgement", []porcupine.Operation{claim(1, 2, 1, 0), end("ack", 3, 1, linOut{}), claim(5, 6, 2, 1)}, ""},
		{"a lease granted after a release of unknown outcome", []porcupine.Operation{claim(1, 2, 1, 0),
			{Input: linIn{Kind: "release", ID: "x", Token: 1}, Call: 3, Return: math.MaxInt64, Output: linOut{Unknown: true}},
			claim(5, 6, 2, 1)}, ""},
		{"a lease granted after a refused acknowledgement", []porcupine.Operation{claim(1, 2, 1, 0),
			end("ack", 3, 1, linOut{Code: codeLeaseLost}), claim(5, 6, 2, 1)}, "was live"},
		{"a lease granted after an acknowledgement of another token", []porcupine.Operation{claim(1, 2, 1, 0),
			end("ack", 3, 3, linOut{}), claim(5, 6, 2, 1)}, "was live"},
		{"a lease granted after a cancellation", []porcupine.Operation{claim(1, 2, 1, 0), end("cancel", 3, 0, linOut{}), claim(5, 6, 2, 1)}, ""},
		{"a lease granted once the last expired", []porcupine.Operation{claim(1, 2, 1, 0), claim(3, 4, 2, minute)}, ""},
		{"a lease granted once a renewal shortened the last", []porcupine.Operation{claim(1, 2, 1, 0),
			{Input: linIn{Kind: "renew", ID: "x", Token: 1, Dur: 1}, Call: 3, Return: 4, Output: linOut{Token: 1, Expires: 1}},
			claim(5, 6, 2, 1)}, ""},
		{"a lease granted before a renewal's expiry", []porcupine.Operation{claim(1, 2, 1, 0),
			{Input: linIn{Kind: "renew", ID: "x", Token: 1, Dur: minute}, Call: 3, Return: 4, Output: linOut{Token: 1, Expires: minute}},
			claim(5, 6, 2, 1)}, "was live"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &replWorld{}
			w.hist.ops = tc.history
			w.checkLeases()
			got := w.violation()
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("a sound history is flagged: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("violation %v, want one saying %q", got, tc.want)
			}
		})
	}
}

// lostBy flags a state that lacks what an answered call did, and nothing
// else.
func TestLostByFindsWhatAStateLacks(t *testing.T) {
	st := fsm.New()
	now := simEpoch.UnixNano()
	for _, c := range []fsm.Command{
		{Kind: fsm.KindAdmit, Now: now, ExecutionID: "x", WorkflowID: "wf"},
		{Kind: fsm.KindClaim, Now: now, Limit: 5, Duration: int64(time.Minute)},
		{Kind: fsm.KindAcknowledge, Now: now, ExecutionID: "x", Token: 1, Outcome: fsm.Outcome{Status: fsm.StatusCompleted}},
	} {
		if r := st.Apply(&c); r.Code != fsm.CodeOK {
			t.Fatalf("%v: %v", c.Kind, r.Code)
		}
	}
	op := func(in linIn, out linOut) porcupine.Operation { return porcupine.Operation{Input: in, Output: out} }
	for _, tc := range []struct {
		name string
		op   porcupine.Operation
		lost bool
	}{
		{"an admission it holds", op(linIn{Kind: "admit", ID: "x"}, linOut{}), false},
		{"an admission it lacks", op(linIn{Kind: "admit", ID: "y"}, linOut{}), true},
		{"a refused admission", op(linIn{Kind: "admit", ID: "y"}, linOut{Code: codeConflict}), false},
		{"an admission of unknown outcome", op(linIn{Kind: "admit", ID: "y"}, linOut{Unknown: true}), false},
		{"the outcome it holds", op(linIn{Kind: "ack", ID: "x", Token: 1, Done: true}, linOut{Status: execstore.StatusCompleted}), false},
		{"an outcome it does not hold", op(linIn{Kind: "ack", ID: "x", Token: 1, Fail: true}, linOut{Status: execstore.StatusFailed}), true},
		{"a step it lacks", op(linIn{Kind: "save", ID: "x", Token: 1, Value: "1"}, linOut{}), true},
		{"a token it handed out", op(linIn{Kind: "claim", ID: "x"}, linOut{Token: 1}), false},
		{"a token past its last", op(linIn{Kind: "claim", ID: "x"}, linOut{Token: 2}), true},
		{"a claim that leased nothing", op(linIn{Kind: "claim", ID: "z"}, linOut{}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := lostBy(st, tc.op); (msg != "") != tc.lost {
				t.Fatalf("lostBy = %q, want lost = %v", msg, tc.lost)
			}
		})
	}
}

// The linearizability model accepts any output of a call of unknown
// outcome, taking effect at some point after its call or never, and still
// rejects what no order explains.
func TestTheModelTakesAnUnknownOutcomeAsHappenedOrNot(t *testing.T) {
	admit := porcupine.Operation{Input: linIn{Kind: "admit", ID: "x"}, Call: 1, Return: math.MaxInt64, Output: linOut{Unknown: true}}
	get := func(call int64, found bool) porcupine.Operation {
		out := linOut{Code: codeNotFound}
		if found {
			out = linOut{Status: execstore.StatusAdmitted}
		}
		return porcupine.Operation{Input: linIn{Kind: "get", ID: "x"}, Call: call, Return: call + 1, Output: out}
	}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		{"never happened", []porcupine.Operation{admit, get(2, false), get(4, false)}, porcupine.Ok},
		{"happened between two reads", []porcupine.Operation{admit, get(2, false), get(4, true)}, porcupine.Ok},
		{"undone after it was seen", []porcupine.Operation{admit, get(2, true), get(4, false)}, porcupine.Illegal},
		{"seen before it was called", []porcupine.Operation{get(0, true), {Input: admit.Input, Call: 2, Return: math.MaxInt64, Output: admit.Output}},
			porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Recheck(tc.history, time.Minute); got != tc.want {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}
