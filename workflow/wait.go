package workflow

import (
	"encoding/json"
)

// WaitForKey waits until the store's key-value entry storeKey has a value
// (written by execstore.Store.Commit), and returns the value decoded into T.
// The value is saved under key, so every rerun returns the same value even
// if the entry changes later.
//
// If the entry has no value yet, WaitForKey registers a watch
// (execstore.Store.Watch) and suspends, returning an error matching
// ErrSuspended, which the workflow function MUST return. The commit that
// writes storeKey wakes the execution in the same durable step, and the
// rerun's WaitForKey reads the value. A commit that deletes the entry wakes
// it too; the rerun then watches and suspends again.
func WaitForKey[T any](x *Execution, key, storeKey string) (T, error) {
	var zero T
	raw, err := x.waitForKey(key, storeKey)
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, recordError(invalidValue(key, err))
	}
	return v, nil
}

func (x *Execution) waitForKey(key, storeKey string) (json.RawMessage, error) {
	const op = "WaitForKey"
	if err := x.begin(op, key); err != nil {
		return nil, err
	}
	if v, ok, err := x.readStep(op, key, key); err != nil || ok {
		return v, err
	}
	v, ok, err := x.read(op, key, storeKey)
	if err != nil {
		return nil, err
	}
	if !ok {
		if _, err := x.store().Watch(x.ctx, x.ID(), storeKey); err != nil {
			return nil, x.abort(op, key, err)
		}
		// Read again: a commit between the read and the watch fired no watch.
		if v, ok, err = x.read(op, key, storeKey); err != nil {
			return nil, err
		}
		if !ok {
			return nil, x.suspend(op, key, "waiting for store key "+storeKey)
		}
	}
	if err := x.saveStep(op, key, key, v); err != nil {
		return nil, err
	}
	return v, nil
}

func (x *Execution) read(op, key, storeKey string) (json.RawMessage, bool, error) {
	v, ok, err := x.store().Read(x.ctx, storeKey)
	if err != nil {
		return nil, false, x.abort(op, key, err)
	}
	return v, ok, nil
}
