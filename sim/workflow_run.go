package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

// The workflow functions of the workflow check. They follow their plan and
// check, as they go, what only the running workflow can see: that a step
// function never runs after a delivery before this one saved its step; that
// Sleep saves the store's time plus its duration as its wake, returns only
// once the store's time has reached it, and never suspends when it had; and
// that Await returns the child's recorded outcome.

// wfTokenKey is the context key of the delivery's lease token, which the
// check's invoker puts in the context the worker hands to step functions.
type wfTokenKey struct{}

// runParent is the parent workflow: its plan's operations, then its end.
func (ww *wfWorld) runParent(x *workflow.Execution, p wfPlan) (wfResult, error) {
	trail := make([]string, 0, len(p.Ops))
	for _, op := range p.Ops {
		entry, err := ww.do(x, op)
		if err != nil {
			return wfResult{}, err
		}
		trail = append(trail, entry)
	}
	done := strings.Join(trail, " ")
	switch p.End {
	case wfEndFail:
		return wfResult{}, &wfError{code: codeWorkflowFailed, msg: wfFailure(done)}
	case wfEndPanic:
		_, err := workflow.Run(x, "end", ww.stepFn(x, "end", func(context.Context, string, int) (wfStepValue, error) {
			panic(wfPanic(done))
		}))
		return wfResult{}, err
	}
	return wfResult{Trail: trail}, nil
}

// do performs one operation and returns its trail entry. An error that is
// not the operation's recorded outcome (a suspension, a lost lease) ends the
// run.
func (ww *wfWorld) do(x *workflow.Execution, op wfOp) (string, error) {
	switch op.Kind {
	case wfFail:
		_, err := workflow.Run(x, op.Key, ww.stepFn(x, op.Key, func(_ context.Context, by string, _ int) (wfStepValue, error) {
			return wfStepValue{}, &wfError{code: codeStepFailed, msg: "sim: step " + op.Key + " failed " + by}
		}))
		return recordedEntry("fail", err)
	case wfRetry:
		v, err := workflow.Run(x, op.Key, ww.stepFn(x, op.Key, func(_ context.Context, by string, attempt int) (wfStepValue, error) {
			if attempt <= op.Fails {
				msg := fmt.Sprintf("sim: attempt %d of %s failed %s", attempt, op.Key, by)
				return wfStepValue{}, workflow.Retryable(&wfError{code: codeAttemptFailed, msg: msg}, op.Max, op.D)
			}
			return wfStepValue{V: op.V, Attempt: attempt, By: by}, nil
		}))
		if err != nil {
			return recordedEntry("retry-failed", err)
		}
		return fmt.Sprintf("retry:%d@%d", v.V, v.Attempt), nil
	case wfSleep:
		if err := ww.sleep(x, op); err != nil {
			return "", err
		}
		return "sleep", nil
	case wfKey:
		v, err := workflow.WaitForKey[wfStepValue](x, op.Key, wfStoreKey(x.ID(), op.Key))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("key:%d", v.V), nil
	case wfChild:
		return ww.child(x, op)
	}
	v, err := workflow.Run(x, op.Key, ww.stepFn(x, op.Key, ww.value(op)))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("run:%d", v.V), nil
}

// recordedEntry turns a step's recorded failure into its trail entry; any
// other error ends the run.
func recordedEntry(prefix string, err error) (string, error) {
	var we *execstore.WorkflowError
	if err == nil {
		return prefix + ":none", nil
	}
	if !errors.As(err, &we) {
		return "", err
	}
	return prefix + ":" + we.Code, nil
}

func wfStoreKey(id, key string) string { return "sim/" + id + "/" + key }

// value is the step function of a run or slow step.
func (ww *wfWorld) value(op wfOp) func(context.Context, string, int) (wfStepValue, error) {
	return func(ctx context.Context, by string, attempt int) (wfStepValue, error) {
		if op.Kind == wfSlow {
			t := ww.clock.TimerAt(ww.clock.Now().Add(wfSlowStep))
			defer t.Stop()
			select {
			case <-t.C():
			case <-ctx.Done():
				return wfStepValue{}, ctx.Err()
			}
		}
		return wfStepValue{V: op.V, Attempt: attempt, By: by}, nil
	}
}

// stepFn wraps a step function: it counts the invocation, checks that no
// earlier delivery saved the step, and stalls the delivery if its plan says
// so, before it runs body with the delivery's mark and the attempt.
func (ww *wfWorld) stepFn(x *workflow.Execution, key string, body func(context.Context, string, int) (wfStepValue, error)) func(context.Context) (wfStepValue, error) {
	id := x.ID()
	return func(ctx context.Context) (wfStepValue, error) {
		tok, _ := ctx.Value(wfTokenKey{}).(uint64)
		attempt := ww.ranStep(id, key, tok)
		if ww.stall(ctx, leaseKey{id, tok}) {
			return wfStepValue{}, fmt.Errorf("sim: the delivery stalled: %w", context.Cause(ctx))
		}
		return body(ctx, fmt.Sprintf("(token %d)", tok), attempt)
	}
}

// The step keys the workflow package keeps for a step's failure and its
// retried attempts (workflow/execution.go). The check reads them to learn
// the attempt, and which lease saved a failure.
func wfFailureKey(key string) string            { return "$error/" + key }
func wfRetryKey(key string, attempt int) string { return "$retry/" + key + "/" + strconv.Itoa(attempt) }

// ranStep counts one invocation of a step function under lease token tok
// and returns its attempt: one more than the attempts saved as retried. The
// step, and its failure, must not be saved yet by this lease or an earlier
// one: a delivery claimed after the save would have read it and returned
// it without running the function.
func (ww *wfWorld) ranStep(id, key string, tok uint64) int {
	// Not the delivery's context: the reads are the check's, and must not
	// fail because the lease was lost.
	ctx := context.Background()
	attempt := 1
	for ; ; attempt++ {
		_, ok, err := ww.store.Step(ctx, id, wfRetryKey(key, attempt))
		if err != nil {
			ww.fail("reading step %q of %s: %v", key, id, err)
		}
		if !ok {
			break
		}
	}
	for _, k := range []string{key, wfFailureKey(key)} {
		raw, ok, err := ww.store.Step(ctx, id, k)
		if err != nil {
			ww.fail("reading step %q of %s: %v", k, id, err)
		}
		if saved, marked := wfSavedBy(raw); ok && marked && saved <= tok {
			ww.fail("the step function of %q of %s ran under lease %d after lease %d had saved %q", key, id, tok, saved, k)
		}
	}
	ww.mu.Lock()
	defer ww.mu.Unlock()
	run := wfStepRun{id, key, attempt}
	if ww.runs[run] > 0 {
		ww.stepRepeats++
	}
	ww.runs[run]++
	ww.stepRuns++
	return attempt
}

var wfTokenMark = regexp.MustCompile(`\(token (\d+)\)`)

// wfSavedBy returns the lease token a saved step value names: the By of a
// step value, in the message of a saved failure or retry.
func wfSavedBy(raw json.RawMessage) (uint64, bool) {
	m := wfTokenMark.FindSubmatch(raw)
	if m == nil {
		return 0, false
	}
	tok, err := strconv.ParseUint(string(m[1]), 10, 64)
	return tok, err == nil
}

// stall blocks the first step function a stalling delivery runs: until its
// lease is lost (wfStallOnLoss), or until the check ends, past the abort
// grace period (wfHangOnLoss). It reports whether it blocked.
func (ww *wfWorld) stall(ctx context.Context, k leaseKey) bool {
	ww.mu.Lock()
	kind, first := ww.byLease[k], !ww.stalled[k]
	ww.stalled[k] = true
	ww.mu.Unlock()
	switch {
	case !first:
		return false
	case kind == wfStallOnLoss:
		select {
		case <-ctx.Done():
		case <-ww.hang:
		}
		return true
	case kind == wfHangOnLoss:
		<-ww.hang
		return true
	}
	return false
}

// sleep is Sleep, checked against the store's time read before (t0) and
// after (t1) it: a first run saves the wake t0+D..t1+D; Sleep returns only
// once the store's time has reached the wake, and never suspends when it had
// reached it before the call.
func (ww *wfWorld) sleep(x *workflow.Execution, op wfOp) error {
	ctx, id := context.Background(), x.ID()
	_, savedBefore, err := ww.store.Step(ctx, id, op.Key)
	if err != nil {
		ww.fail("reading step %q of %s: %v", op.Key, id, err)
	}
	t0 := ww.store.Now()
	err = x.Sleep(op.Key, op.D)
	t1 := ww.store.Now()
	if err != nil && !errors.Is(err, workflow.ErrSuspended) {
		return err // the run was aborted: nothing to check
	}
	raw, ok, rerr := ww.store.Step(ctx, id, op.Key)
	var wake time.Time
	if rerr != nil || !ok || json.Unmarshal(raw, &wake) != nil {
		ww.fail("Sleep(%q) of %s left no wake time (%v)", op.Key, id, rerr)
		return err
	}
	switch {
	case !savedBefore && (wake.Before(t0.Add(op.D)) || wake.After(t1.Add(op.D))):
		ww.fail("Sleep(%q, %v) of %s saved the wake %s, not the store's time plus %v (%s to %s)",
			op.Key, op.D, id, simTime(wake), op.D, simTime(t0.Add(op.D)), simTime(t1.Add(op.D)))
	case err == nil && wake.After(t1):
		ww.fail("Sleep(%q) of %s returned at the store's time %s, before its wake %s", op.Key, id, simTime(t1), simTime(wake))
	case err != nil && !wake.After(t0):
		ww.fail("Sleep(%q) of %s suspended again at the store's time %s, past its wake %s", op.Key, id, simTime(t0), simTime(wake))
	}
	return err
}

// child starts a child and awaits it, checking that Await returns the
// child's recorded outcome.
func (ww *wfWorld) child(x *workflow.Execution, op wfOp) (string, error) {
	id, err := x.Start(op.Key, "sim-child", wfChildParams{Kind: op.Child, V: op.V})
	if err != nil {
		return "", err
	}
	ww.noteChild(x.ID(), op, id)
	v, err := workflow.Await[wfChildResult](x, id)
	var ce *workflow.ChildError
	switch {
	case err == nil:
		raw, _ := json.Marshal(v)
		ww.checkAwait(id, string(raw), nil)
		return fmt.Sprintf("child:%d", v.V), nil
	case errors.As(err, &ce):
		ww.checkAwait(id, "", ce)
		if errors.Is(err, execstore.ErrCancelled) {
			return "child-cancelled", nil
		}
		return "child-failed:" + execstore.ErrorCode(ce), nil
	}
	return "", err
}

// checkAwait checks what Await returned (a result, or the child's error)
// against the child's record.
func (ww *wfWorld) checkAwait(id, result string, ce *workflow.ChildError) {
	rec, err := ww.store.Get(context.Background(), id)
	switch {
	case err != nil:
		ww.fail("reading child %s: %v", id, err)
	case !rec.Status.Terminal():
		ww.fail("Await(%s) returned while the child is %s", id, rec.Status)
	case rec.Status == execstore.StatusCompleted && (ce != nil || result != string(rec.Outcome.Result)):
		ww.fail("Await(%s) returned %s / %v, the child completed with %s", id, result, ce, rec.Outcome.Result)
	case rec.Status == execstore.StatusCancelled && (ce == nil || !errors.Is(ce, execstore.ErrCancelled)):
		ww.fail("Await(%s) returned %s / %v for a cancelled child, not ErrCancelled", id, result, ce)
	case rec.Status == execstore.StatusFailed && (ce == nil || ce.Err.Code != rec.Outcome.Error.Code || ce.Err.Message != rec.Outcome.Error.Message):
		ww.fail("Await(%s) returned %s / %v, the child failed with %+v", id, result, ce, rec.Outcome.Error)
	}
}

// runChild is the child workflow.
func (ww *wfWorld) runChild(x *workflow.Execution, p wfChildParams) (wfChildResult, error) {
	switch p.Kind {
	case wfChildOK:
		v, err := workflow.Run(x, "value", ww.stepFn(x, "value", ww.value(wfOp{Kind: wfRun, V: p.V})))
		return wfChildResult{V: v.V}, err
	case wfChildFails:
		return wfChildResult{}, &wfError{code: codeChildFailed, msg: wfChildFailure}
	case wfChildBlock:
		_, err := workflow.Run(x, "block", ww.stepFn(x, "block", func(ctx context.Context, _ string, _ int) (wfStepValue, error) {
			select {
			case <-ctx.Done():
			case <-ww.hang:
			}
			return wfStepValue{}, errors.New("sim: the blocked step ended without a cancel")
		}))
		return wfChildResult{}, err
	}
	_, err := workflow.WaitForKey[int](x, "never", "sim/never/"+x.ID())
	return wfChildResult{}, err
}
