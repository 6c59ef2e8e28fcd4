//go:build invariants

package fsm

import (
	"strings"
	"testing"

	"github.com/execstore/execstore/fsm/internal/chunk"
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

// In the invariants build, a copy changed while it is shared (a write that
// skipped copy-on-write) makes its release panic, whichever chunked index
// the write reached; a copy left alone is released quietly. Package chunk
// refuses a write that gives another generation than the chunk's, so the
// only way to skip copy-on-write is to give a stale generation, the one
// that made the chunks before the copies: that is the slip here.
func TestAWriteThatSkipsCopyOnWritePanicsAtReleaseInTheInvariantsBuild(t *testing.T) {
	for _, tc := range []struct {
		name string
		slip func(s *State, stale uint32)
	}{
		{"an admission slot", func(s *State, stale uint32) {
			c := s.list.adm.t.Chunk(0)
			c.Put(1, c.Rec(1), StatusFailed, stale)
		}},
		{"a workflow's postings", func(s *State, stale uint32) {
			w, _ := s.list.workflows.Min()
			w.p.Remove(1, &s.list.adm.t, stale)
		}},
		{"the change feed", func(s *State, stale uint32) {
			c, _ := s.list.feed.chunks.Max()
			c.Append(chunk.Entry{Seq: s.meta.ChangeSeq + 1, No: 1, At: 10}, stale)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			for _, id := range []string{"a", "b", "c"} {
				s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: id, WorkflowID: "w"})
			}
			stale := s.gen
			quiet := s.Copy()
			s.Release(quiet)

			c := s.Copy()
			tc.slip(s, stale) // the state writes a chunk its copy shares
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, "skipped copy-on-write") {
					t.Fatalf("recovered %v, want the copy check's panic", r)
				}
			}()
			s.Release(c)
			t.Fatal("releasing a copy that changed while shared did not panic")
		})
	}
}
