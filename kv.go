package execstore

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/execstore/execstore/fsm"
)

// Write is one change to the key-value store.
type Write struct {
	Key   string
	Value json.RawMessage // nil deletes the key
}

// Commit applies the writes and, in the same durable step, requests a wake (at
// the commit's time) for every execution with a watch on any written key, and
// removes those watches. After a crash either the writes and every resulting
// wake are present, or none of them. Writes apply in order (a later write of
// the same key wins). Values must be JSON (ErrInvalidArgument). At most
// Limits.WritesPerCommit writes of at most Limits.CommitBytes of keys and
// values in all (ErrInvalidArgument, and nothing is written).
func (s *Store) Commit(ctx context.Context, writes ...Write) error {
	if len(writes) > s.limits.WritesPerCommit {
		return overLimit(ErrInvalidArgument, "%d writes, more than the limit of %d", len(writes), s.limits.WritesPerCommit)
	}
	c := fsm.Command{Kind: fsm.KindCommit, Writes: make([]fsm.Write, len(writes))}
	size := 0
	for i, w := range writes {
		if err := checkKey("key", w.Key, &s.limits); err != nil {
			return err
		}
		if size += len(w.Key) + len(w.Value); size > s.limits.CommitBytes {
			return overLimit(ErrInvalidArgument, "writes of more than %d bytes in all, the limit of one commit", s.limits.CommitBytes)
		}
		if w.Value != nil {
			if err := checkValue("value of "+w.Key, w.Value, &s.limits); err != nil {
				return err
			}
			c.Writes[i] = fsm.Write{Key: w.Key, Value: string(w.Value), HasValue: true}
		} else {
			c.Writes[i] = fsm.Write{Key: w.Key}
		}
	}
	res, err := s.do(ctx, &c)
	if err != nil {
		return err
	}
	return resultErr(&res, &c)
}

// Read returns a key-value store value and whether the key exists.
func (s *Store) Read(ctx context.Context, key string) (json.RawMessage, bool, error) {
	var (
		v  string
		ok bool
	)
	if err := s.read(ctx, func(st *fsm.State) { v, ok = st.Read(key) }); err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	return json.RawMessage(v), true, nil
}

// Watch registers one watch: the first Commit that writes (sets or deletes)
// any of keys requests a wake for the execution and removes the whole watch.
// Repeating a watch that is still registered (same execution, same set of
// keys, as a rerun of a workflow does) registers nothing more and writes
// nothing.
// Returns WakeRequested when registered, WakeIgnored for a terminal
// execution; ErrExecutionNotFound for an unknown one. A terminal execution's
// watches are dropped.
func (s *Store) Watch(ctx context.Context, executionID string, keys ...string) (WakeResult, error) {
	if len(keys) == 0 {
		return "", invalidArg("watch needs at least one key")
	}
	if len(keys) > s.limits.KeysPerWatch {
		return "", overLimit(ErrInvalidArgument, "%d keys, more than the limit of %d", len(keys), s.limits.KeysPerWatch)
	}
	for _, k := range keys {
		if err := checkKey("key", k, &s.limits); err != nil {
			return "", err
		}
	}
	if checkID("", executionID) != "" {
		return "", notFound(executionID)
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
	c := fsm.Command{Kind: fsm.KindWatch, ExecutionID: executionID, Keys: sorted}
	res, err := s.do(ctx, &c)
	if err != nil {
		return "", err
	}
	if err := resultErr(&res, &c); err != nil {
		return "", err
	}
	return wakeResultFromFSM(res.Wake), nil
}
