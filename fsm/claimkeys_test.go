package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// claimKeysState is a state of n admitted executions, e0..e(n-1), due at
// its time.
func claimKeysState(t *testing.T, n int) *State {
	t.Helper()
	s := New()
	s.meta.Now = 1e9
	for i := range n {
		if r := applyAt(s, Command{Kind: KindAdmit, ExecutionID: fmt.Sprintf("e%d", i), WorkflowID: "w"}); r.Code != CodeOK {
			t.Fatalf("admit: %+v", r)
		}
	}
	return s
}

func keyed(key string, limit int) Command {
	return Command{Kind: KindClaim, Limit: limit, Duration: 60e9, RequestKey: key}
}

// A claim repeated with its request key answers the leases the first
// granted that are still current, with their expiries as they are now, and
// changes nothing: precheck says so, so it is never logged. A lease ended
// or superseded since is left out; other arguments are CodeMismatch.
func TestARepeatedKeyedClaimAnswersItsGrantedLeasesAndChangesNothing(t *testing.T) {
	s := claimKeysState(t, 4)
	first := applyAt(s, keyed("round-1", 3)).Leases
	if len(first) != 3 {
		t.Fatalf("first claim leased %+v", first)
	}
	first = append([]Lease(nil), first...)
	check := func(name string, c Command, want []Lease, code Code) {
		t.Helper()
		c.Now = s.meta.Now + 1e9
		before := dumpOf(s)
		pre, mutates := s.Precheck(&c)
		if mutates {
			t.Fatalf("%s: precheck says the repeat changes the state", name)
		}
		r := s.Apply(&c)
		after := dumpOf(s)
		after.Meta.Now = before.Meta.Now // every command moves the state's clock
		if diff := cmp.Diff(before, after, cmpOpts); diff != "" {
			t.Fatalf("%s: the repeat changed the state:\n%s", name, diff)
		}
		if r.Code != code || pre.Code != code {
			t.Fatalf("%s: code %v (precheck %v), want %v", name, r.Code, pre.Code, code)
		}
		if code != CodeOK {
			return
		}
		if !r.Unchanged || !cmp.Equal(want, r.Leases) || !cmp.Equal(want, pre.Leases) {
			t.Fatalf("%s: answered %+v (precheck %+v), want %+v unchanged", name, r.Leases, pre.Leases, want)
		}
	}
	check("the repeat", keyed("round-1", 3), first, CodeOK)

	renewed := applyAt(s, Command{Kind: KindRenew, ExecutionID: first[0].ExecutionID, Token: first[0].Token, Duration: 90e9}).Lease
	applyAt(s, Command{Kind: KindAcknowledge, ExecutionID: first[1].ExecutionID, Token: first[1].Token, Outcome: Outcome{Status: StatusCompleted}})
	check("after a renewal and an acknowledgement", keyed("round-1", 3), []Lease{renewed, first[2]}, CodeOK)
	check("with another limit", keyed("round-1", 2), nil, CodeMismatch)
	other := keyed("round-1", 3)
	other.Duration = 30e9
	check("with another lease duration", other, nil, CodeMismatch)

	// A claim with another key leases afresh: the one execution left.
	if got := applyAt(s, keyed("round-2", 3)).Leases; len(got) != 1 || got[0].ExecutionID != "e3" {
		t.Fatalf("a claim with another key leased %+v, want e3", got)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A keyed claim that leased nothing is not remembered: its repeat claims
// afresh. A key is forgotten once its claim's lease duration has passed:
// a claim with it then leases afresh (the expired leases included).
func TestAKeyLastsAsLongAsItsLeasesAndOnlyIfItLeased(t *testing.T) {
	s := New()
	s.meta.Now = 1e9
	if r := applyAt(s, keyed("k", 2)); len(r.Leases) != 0 || s.grants.Len() != 0 {
		t.Fatalf("an idle keyed claim answered %+v and left %d grants", r, s.grants.Len())
	}
	applyAt(s, Command{Kind: KindAdmit, ExecutionID: "e", WorkflowID: "w"})
	got := applyAt(s, keyed("k", 2)).Leases
	if len(got) != 1 || got[0].ExecutionID != "e" {
		t.Fatalf("the repeat of an idle keyed claim leased %+v, want e", got)
	}
	lease := got[0]
	// Just before the key expires, the repeat answers the lease; at its
	// expiry, the claim leases afresh: e, its lease expired, with a new token.
	c := keyed("k", 2)
	c.Now = lease.ExpiresAt - 1
	if r := s.Apply(&c); !r.Unchanged || len(r.Leases) != 1 || r.Leases[0] != lease {
		t.Fatalf("the repeat before the expiry answered %+v", r)
	}
	c.Now = lease.ExpiresAt
	r := s.Apply(&c)
	if r.Unchanged || len(r.Leases) != 1 || r.Leases[0].Token != lease.Token+1 {
		t.Fatalf("the claim at the key's expiry answered %+v, want a new lease of e", r)
	}
	if s.grants.Len() != 1 || s.grantLeases != 1 {
		t.Fatalf("after the new grant: %d grants holding %d leases, want the one", s.grants.Len(), s.grantLeases)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// The grants hold at most MaxGrantLeases leases: a new grant evicts the
// earliest-expiring ones first, and expired grants are removed by the
// keyed claims that lease, grantPurge at a time.
func TestTheGrantsAreBounded(t *testing.T) {
	s := New()
	s.meta.Now = 1e9
	const per = 4096
	n := MaxGrantLeases/per + 2
	for i := range n * per {
		applyAt(s, Command{Kind: KindAdmit, ExecutionID: fmt.Sprintf("e%07d", i), WorkflowID: "w"})
	}
	for i := range n {
		if got := applyAt(s, keyed(fmt.Sprintf("k%03d", i), per)).Leases; len(got) != per {
			t.Fatalf("claim %d leased %d", i, len(got))
		}
		if s.grantLeases > MaxGrantLeases {
			t.Fatalf("after claim %d the grants hold %d leases, over %d", i, s.grantLeases, MaxGrantLeases)
		}
	}
	if _, ok := s.grants.Get(grantItem{Key: "k000"}); ok {
		t.Fatal("the earliest-expiring grant was kept past the bound")
	}
	if _, ok := s.grants.Get(grantItem{Key: fmt.Sprintf("k%03d", n-1)}); !ok {
		t.Fatal("the newest grant was not kept")
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// Long after every key expired, a keyed claim that leases removes
	// grantPurge of them (here all: fewer are left).
	s.meta.Now += 3600e9
	applyAt(s, Command{Kind: KindAdmit, ExecutionID: "late", WorkflowID: "w"})
	applyAt(s, keyed("late-key", 1))
	if s.grants.Len() > grantPurge+1 || s.grants.Len() < 1 {
		t.Fatalf("after the late claim %d grants are left", s.grants.Len())
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// The grants travel in snapshots: a decoded state answers a repeat as the
// state it was encoded from does, and CheckState agrees with DecodeState.
func TestGrantsSurviveASnapshot(t *testing.T) {
	s := claimKeysState(t, 3)
	first := append([]Lease(nil), applyAt(s, keyed("round-1", 2)).Leases...)
	b := encodeState(t, s)
	sum, err := CheckState(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	if sum != decoded.Summary() || sum.Grants != 1 {
		t.Fatalf("CheckState %+v, DecodeState %+v: want the same, with one grant", sum, decoded.Summary())
	}
	c := keyed("round-1", 2)
	c.Now = decoded.meta.Now + 1
	if r := decoded.Apply(&c); !r.Unchanged || !cmp.Equal(first, r.Leases) {
		t.Fatalf("the decoded state answered the repeat %+v, want %+v", r.Leases, first)
	}
	if err := decoded.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
