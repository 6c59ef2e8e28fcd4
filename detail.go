package execstore

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/execstore/execstore/fsm"
)

// Detail is what an operator looks at beside an execution's record: its
// saved steps and its watches.
type Detail struct {
	Steps     []SavedStep // in key order, at most the limit given to Detail
	StepCount int         // every step saved (Steps may hold fewer)
	Watches   [][]string  // the keys of each watch, in the order they were registered
}

// Detail returns an execution's saved steps (at most stepsMax of them, in
// key order; 0 for none) and its watches. A retired execution has none.
// Errors: ErrExecutionNotFound.
func (s *Store) Detail(ctx context.Context, executionID string, stepsMax int) (Detail, error) {
	var d Detail
	exists := false
	var aerr error
	err := s.read(ctx, func(st *fsm.State) {
		e, _, ok, err := s.getRecord(st, executionID)
		if !ok {
			aerr = err
			return
		}
		exists = true
		d.StepCount = int(e.StepCount)
		if stepsMax > 0 {
			st.StepsOf(executionID, func(key, value string) bool {
				d.Steps = append(d.Steps, SavedStep{Key: key, Value: json.RawMessage(value)})
				return len(d.Steps) < stepsMax
			})
		}
		for _, keys := range st.WatchesOf(executionID) {
			d.Watches = append(d.Watches, slices.Clone(keys))
		}
	})
	if err != nil {
		return Detail{}, err
	}
	if aerr != nil {
		return Detail{}, aerr
	}
	if !exists {
		return Detail{}, notFound(executionID)
	}
	return d, nil
}
