package lockstep

import (
	"context"
	"fmt"
	"sync"

	"github.com/execstore/execstore"
)

// Admit admits callers × each executions ("<prefix><caller>-<i>", workflow
// "w") from callers goroutines, each admitting its next only once its latest
// is answered. It returns the first error any of them got.
func Admit(ctx context.Context, s *execstore.Store, prefix string, callers, each int) error {
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("%s%d-%d", prefix, c, i)
				if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil once closed and empty
}
