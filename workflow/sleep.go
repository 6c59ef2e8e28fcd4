package workflow

import (
	"encoding/json"
	"time"

	"github.com/execstore/execstore/internal/mutant"
)

// Sleep suspends the execution for d: the first run saves the wake time
// (the store's time + d, see execstore.Store.Now) under key and requests a
// wake then; the rerun after the wake finds the store's time has reached it
// and returns nil. A rerun before it (another wake came first) requests the
// same wake again and suspends again.
//
// When Sleep suspends it returns an error matching ErrSuspended, which the
// workflow function MUST return.
func (x *Execution) Sleep(key string, d time.Duration) error {
	return x.sleep("Sleep", key, func() time.Time {
		if mutant.WorkflowSleepsByWorkerClock {
			return time.Now().Add(d)
		}
		return x.now().Add(d)
	})
}

// SleepUntil is Sleep until t. The first run's t is saved under key, so a
// rerun waits for the same time even if the workflow computes t differently.
func (x *Execution) SleepUntil(key string, t time.Time) error {
	return x.sleep("SleepUntil", key, func() time.Time { return t })
}

func (x *Execution) sleep(op, key string, wakeAt func() time.Time) error {
	if err := x.begin(op, key); err != nil {
		return err
	}
	raw, ok, err := x.readStep(op, key, key)
	if err != nil {
		return err
	}
	var at time.Time
	if ok {
		if err := json.Unmarshal(raw, &at); err != nil {
			return x.abort(op, key, err)
		}
	} else {
		at = wakeAt().UTC()
		raw, _ := json.Marshal(at)
		if err := x.saveStep(op, key, key, raw); err != nil {
			return err
		}
	}
	return x.sleepUntil(op, key, at, "sleeping")
}
