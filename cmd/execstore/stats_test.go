package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/lockstep"
)

// The stats answer the writer's batches, its waits for its callers and the
// commands queued, as the store counts them.
func TestHTTPStatsCountTheWritersBatchesAndWaits(t *testing.T) {
	store, err := execstore.Open(t.TempDir(), execstore.Options{GroupWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { ts.Close(); store.Close() })
	s := &server{t: t, url: ts.URL, store: store}
	if err := lockstep.Admit(context.Background(), store, "c", 8, 20); err != nil {
		t.Fatal(err)
	}
	st, err := store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.GroupWaits == 0 || st.WALBatches == 0 {
		t.Fatalf("callers in lockstep: %d batches, %d waits with them back", st.WALBatches, st.GroupWaits)
	}
	out := s.expect("GET", "/v1/stats", "", http.StatusOK, "")
	for name, want := range map[string]uint64{"walBatches": st.WALBatches, "groupWaits": st.GroupWaits,
		"groupWaitsMissed": st.GroupWaitsMissed, "queued": uint64(st.Queued)} {
		if out[name] != float64(want) {
			t.Errorf("stats %s = %v, want %d", name, out[name], want)
		}
	}
}

// /healthz answers 200 while the store accepts writes, and says whether the
// path recovery would fall back on checked out: "ok" on a sound store,
// "degraded" with what is damaged when a WAL segment between the two kept
// snapshots is.
func TestHealthzReportsADamagedFallback(t *testing.T) {
	for _, damage := range []bool{false, true} {
		t.Run(fmt.Sprint("damaged=", damage), func(t *testing.T) {
			dir := t.TempDir()
			opts := execstore.Options{SegmentSize: 2048}
			store, err := execstore.Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var snaps []int
			for round := range 3 {
				for i := range 60 {
					params := json.RawMessage(`{"pad":"` + strings.Repeat("x", 200) + `"}`)
					if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("r%d-%d", round, i), WorkflowID: "w", Params: params}); err != nil {
						t.Fatal(err)
					}
				}
				if round < 2 {
					if err := store.Snapshot(ctx); err != nil {
						t.Fatal(err)
					}
					st, _ := store.Stats(ctx)
					snaps = append(snaps, int(st.WALLastIndex))
				}
			}
			store.Close()
			if damage {
				// The first segment starting after the older snapshot and
				// ending before the newest one.
				names, _ := filepath.Glob(filepath.Join(dir, "wal", strings.Repeat("[0-9]", 20)))
				sort.Strings(names)
				damaged := false
				for i := 0; i+1 < len(names) && !damaged; i++ {
					start, _ := strconv.Atoi(filepath.Base(names[i]))
					next, _ := strconv.Atoi(filepath.Base(names[i+1]))
					if start > snaps[0] && next <= snaps[1] {
						b, _ := os.ReadFile(names[i])
						b[len(b)/2] ^= 0xff
						os.WriteFile(names[i], b, 0o640)
						damaged = true
					}
				}
				if !damaged {
					t.Fatalf("no segment between indexes %v", snaps)
				}
			}
			store, err = execstore.Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
			defer func() { ts.Close(); store.Close() }()
			s := &server{t: t, url: ts.URL, store: store}
			deadline := time.Now().Add(10 * time.Second)
			for {
				status, out := s.call("GET", "/healthz", "")
				if status != http.StatusOK {
					t.Fatalf("/healthz: %d %v", status, out)
				}
				if out["fallback"] != "checking" {
					want := map[bool]string{false: "ok", true: "degraded"}[damage]
					if out["status"] != want || (damage && !strings.Contains(fmt.Sprint(out["fallback"]), "corrupt entry")) ||
						(!damage && out["fallback"] != "ok") {
						t.Fatalf("/healthz: %v, want status %q", out, want)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatal("the fallback check did not finish")
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
