package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/lockstep"
)

// newAPI serves every route of the table, without the token check, the
// forwarding and the request log that newHandler puts around them.
func newAPI(store *execstore.Store, logger *slog.Logger) http.Handler {
	return newMux(store, logger, nil)
}

type server struct {
	t     *testing.T
	url   string
	store *execstore.Store
}

func newServer(t *testing.T) *server {
	t.Helper()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	return newServerOn(t, func() time.Time { return now })
}

// newServerOn serves a store whose clock is now.
func newServerOn(t *testing.T, now func() time.Time) *server {
	t.Helper()
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { ts.Close(); store.Close() })
	return &server{t: t, url: ts.URL, store: store}
}

// call sends a request and decodes the JSON answer.
func (s *server) call(method, path, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	checkAnswer(s.t, method, path, resp.StatusCode, resp.Header, raw)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		s.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, out
}

func (s *server) expect(method, path, body string, status int, code string) map[string]any {
	s.t.Helper()
	got, out := s.call(method, path, body)
	if got != status || (code != "" && out["code"] != code) {
		s.t.Fatalf("%s %s %s: %d %.300v, want %d %s", method, path, shorten(body), got, out, status, code)
	}
	return out
}

// "Local or HTTP trigger omits an execution ID | The SDK returns the ID accepted by ExecutionClient."
func TestHTTPTriggerWithoutAnIDReturnsTheGeneratedID(t *testing.T) {
	s := newServer(t)
	out := s.expect("POST", "/v1/executions", `{"workflowId":"w"}`, http.StatusCreated, "")
	id, _ := out["executionId"].(string)
	if _, err := s.store.Get(context.Background(), id); id == "" || err != nil {
		t.Fatalf("returned ID %q not in the store: %v", id, err)
	}
}

// "Local or HTTP trigger supplies an ID in use | The SDK throws ExecutionAdmissionError; the HTTP route returns 409 Conflict."
func TestHTTPTriggerWithAnIDInUseIs409(t *testing.T) {
	s := newServer(t)
	body := `{"executionId":"order-42","workflowId":"charge-order","params":{"order":42},"context":{"tenant":"shop"}}`
	out := s.expect("POST", "/v1/executions", body, http.StatusCreated, "")
	if out["executionId"] != "order-42" {
		t.Fatalf("answer %v", out)
	}
	out = s.expect("POST", "/v1/executions", body, http.StatusConflict, "EXECUTION_ID_CONFLICT")
	if msg, _ := out["message"].(string); msg == "" {
		t.Fatalf("no message: %v", out)
	}
}

func TestHTTPGetReturnsTheRecordInLowerCamelCase(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w","params":{"b":1, "a":2},"context":{"k":"v"}}`, http.StatusCreated, "")
	out := s.expect("GET", "/v1/executions/e", "", http.StatusOK, "")
	want := map[string]any{
		"executionId": "e", "workflowId": "w", "params": map[string]any{"b": 1.0, "a": 2.0},
		"context": map[string]any{"k": "v"}, "status": "admitted",
		"admittedAt": "2026-01-02T12:00:00Z", "updatedAt": "2026-01-02T12:00:00Z", "dueAt": "2026-01-02T12:00:00Z", "attempts": 0.0,
	}
	for k, v := range want {
		if b1, _ := json.Marshal(out[k]); !bytes.Equal(b1, must(json.Marshal(v))) {
			t.Errorf("%s = %v, want %v", k, out[k], v)
		}
	}
	s.expect("GET", "/v1/executions/nobody", "", http.StatusNotFound, "EXECUTION_NOT_FOUND")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestHTTPAdmissionRefusesInvalidEvents(t *testing.T) {
	s := newServer(t)
	for _, body := range []string{
		``, `[]`, `{`, `{"workflowId":""}`, `{"workflowId":"w","params":[]}`, `{"workflowId":"w","params":null}`,
		`{"workflowId":"w","params":{"a":1,"a":2}}`, `{"workflowId":"w","workflowId":"x"}`, `{"workflowId":"w","context":{"k":1}}`,
		`{"workflowId":"w","extra":1}`, "{\"workflowId\":\"w\xff\"}",
	} {
		s.expect("POST", "/v1/executions", body, http.StatusBadRequest, "INVALID_EXECUTION_EVENT")
	}
	if st, _ := s.store.Stats(context.Background()); st.Executions != 0 {
		t.Fatalf("a refused admission was stored: %+v", st)
	}
}

func TestHTTPWakes(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
	out := s.expect("POST", "/v1/executions/e/wakes", `{"at":"2026-01-02T12:10:00Z"}`, http.StatusOK, "")
	if out["status"] != "requested" {
		t.Fatalf("wake answer %v", out)
	}
	s.expect("POST", "/v1/executions/ghost/wakes", `{"at":"2026-01-02T12:10:00Z"}`, http.StatusNotFound, "EXECUTION_NOT_FOUND")
	s.expect("POST", "/v1/executions/e/wakes", `{"at":"soon"}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	s.expect("POST", "/v1/executions/e/wakes", `{}`, http.StatusBadRequest, "INVALID_ARGUMENT")

	// Deliver it to completion over HTTP, then a wake is ignored.
	out = s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, http.StatusOK, "")
	leases := out["leases"].([]any)
	lease, _ := json.Marshal(leases[0])
	s.expect("POST", "/v1/leases/steps", `{"lease":`+string(lease)+`,"key":"charge","value":{"receipt":"r-1"}}`, http.StatusOK, "")
	out = s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+string(lease)+`,"outcome":{"status":"completed","result":{"receipt":"r-1"}}}`, http.StatusOK, "")
	if out["status"] != "completed" {
		t.Fatalf("acknowledge answer %v", out)
	}
	out = s.expect("POST", "/v1/executions/e/wakes", `{"at":"2026-01-02T12:10:00Z"}`, http.StatusOK, "")
	if out["status"] != "ignored" {
		t.Fatalf("wake on terminal: %v", out)
	}
	s.expect("POST", "/v1/leases/renew", `{"lease":`+string(lease)+`,"leaseDurationMs":1000}`, http.StatusConflict, "LEASE_LOST")
	out = s.expect("GET", "/v1/executions/e/await?timeout=1s", "", http.StatusOK, "")
	if out["outcome"].(map[string]any)["result"].(map[string]any)["receipt"] != "r-1" {
		t.Fatalf("await answer %v", out)
	}
	s.expect("GET", "/v1/executions/e/steps/charge", "", http.StatusOK, "")
}

// A remote worker decides due-ness with the store's time: a claim answers
// it, and the stats count stamps held back by a clock behind it.
func TestHTTPClaimsAnswerTheStoresTimeAndStatsCountAClockBehindIt(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := t0
	set := func(t time.Time) { mu.Lock(); clock = t; mu.Unlock() }
	s := newServerOn(t, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
	set(t0.Add(time.Hour))
	s.expect("POST", "/v1/store/commit", `{"writes":[{"key":"k","value":1}]}`, http.StatusOK, "")
	set(t0.Add(time.Minute))
	out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, http.StatusOK, "")
	if out["now"] != "2026-01-02T13:00:00Z" || len(out["leases"].([]any)) != 1 {
		t.Fatalf("claims answer %v, want one lease and now at the store's time 13:00", out)
	}
	out = s.expect("GET", "/v1/stats", "", http.StatusOK, "")
	if out["clockBehindStamps"] != 1.0 || out["clockBehindMaxMs"] != float64(59*time.Minute/time.Millisecond) || out["clockBehindMs"] != float64(59*time.Minute/time.Millisecond) {
		t.Fatalf("stats %v, want one stamp held back by 59 minutes", out)
	}
}

func TestServeShutsDownCleanlyAndClosesTheStore(t *testing.T) {
	dir := t.TempDir()
	store, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUntil(ctx, ln, store, slog.New(slog.DiscardHandler)) }()
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/executions", "application/json", strings.NewReader(`{"executionId":"e","workflowId":"w"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("admit over HTTP: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serveUntil: %v", err)
	}
	// The store was closed: its directory can be opened again, and kept the admission.
	again, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Get(context.Background(), "e"); err != nil {
		t.Fatal(err)
	}
}

func TestInspectPrintsTheStoreAndChecksIt(t *testing.T) {
	dir := t.TempDir()
	store, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	store.Admit(context.Background(), execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	store.Snapshot(context.Background())
	store.Close()
	var out, errOut bytes.Buffer
	if err := run([]string{"inspect", "--data", dir}, &out, &errOut); err != nil {
		t.Fatalf("inspect: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"1 (0 terminal, 0 retired, 1 pending)", "entries 1 to 1", "snapshot-00000000000000000001.snap (index 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run([]string{"inspect", "--data", dir + "/missing"}, &out, &errOut); err == nil {
		t.Error("inspect of a missing directory succeeded")
	}
}

func TestDemoRunsTheShopStory(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"demo", "--data", t.TempDir(), "--wait", "20ms"}, &out, &errOut); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"refused with EXECUTION_ID_CONFLICT", "trigger order-42-2: admitted", "charged 2 times, 32.00 in all"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
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

// POST /v1/executions/{id}/cancel cancels an execution and answers with its
// record; a second cancel answers with the same record; an unknown ID is 404
// and a reason over the limit 422.
func TestHTTPCancelAnswersTheCancelledRecord(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"order-42","workflowId":"charge-order"}`, 201, "")
	rec := s.expect("POST", "/v1/executions/order-42/cancel", `{"reason":"the customer cancelled"}`, 200, "")
	outcome, _ := rec["outcome"].(map[string]any)
	errObj, _ := outcome["error"].(map[string]any)
	if rec["status"] != "cancelled" || outcome["status"] != "cancelled" ||
		errObj["message"] != "the customer cancelled" || errObj["code"] != "CANCELLED" {
		t.Fatalf("cancel answered %v", rec)
	}
	again := s.expect("POST", "/v1/executions/order-42/cancel", `{"reason":"again"}`, 200, "")
	if fmt.Sprint(again) != fmt.Sprint(rec) {
		t.Fatalf("a second cancel answered %v, want %v", again, rec)
	}
	s.expect("POST", "/v1/executions/nobody/cancel", `{"reason":""}`, 404, "EXECUTION_NOT_FOUND")
	s.expect("POST", "/v1/executions/order-42/cancel", `{}`, 400, "INVALID_ARGUMENT")
	s.expect("POST", "/v1/executions/order-42/cancel", `{"reason":"`+strings.Repeat("r", 4097)+`"}`, 422, "LIMIT_EXCEEDED")
}

// An admission's maxAttempts bounds its deliveries; a release's error becomes
// the cause of the ATTEMPTS_EXHAUSTED failure of its last allowed attempt.
func TestHTTPMaxAttemptsAndTheReleasesError(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w","maxAttempts":1}`, 201, "")
	s.expect("POST", "/v1/executions", `{"executionId":"x","workflowId":"w","maxAttempts":65536}`, 422, "LIMIT_EXCEEDED")
	claimed := s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":60000}`, 200, "")
	leases, _ := claimed["leases"].([]any)
	if len(leases) != 1 {
		t.Fatalf("claims answered %v", claimed)
	}
	lease, _ := json.Marshal(leases[0])
	s.expect("POST", "/v1/leases/release", `{"lease":`+string(lease)+`,"retryAfterMs":0,"error":{"name":"E","message":"card declined","code":"DECLINED"}}`, 200, "")
	rec := s.expect("GET", "/v1/executions/e", "", 200, "")
	outcome, _ := rec["outcome"].(map[string]any)
	errObj, _ := outcome["error"].(map[string]any)
	cause, _ := errObj["cause"].(map[string]any)
	if rec["status"] != "failed" || rec["maxAttempts"] != 1.0 || errObj["code"] != "ATTEMPTS_EXHAUSTED" || cause["code"] != "DECLINED" {
		t.Fatalf("after the last release: %v", rec)
	}
}

// sim -coverage prints the table and fails when a required cell stays at
// zero, as it must over a run too short to reach them all.
func TestSimCoverageFailsOnARequiredCellAtZero(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"sim", "-seeds", "1", "-ops", "30", "-lin", "0", "-workflow", "0", "-replicated", "0", "-coverage", "-dir", t.TempDir()}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "required coverage cells not reached") {
		t.Fatalf("sim -coverage over 30 operations returned %v", err)
	}
	if !strings.Contains(out.String(), "(required)") || !strings.Contains(out.String(), "sim: 1 seeds, 30 ops") {
		t.Fatalf("no coverage table or summary line:\n%s", out.String())
	}
}

// sim -workflow runs the workflow checks, counts a violation in the summary
// line, and prints the command that reruns the failing seed with the same
// mutant.
func TestSimWorkflowChecksReportAViolationWithItsRerunCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "1", "-replicated", "0", "-dir", t.TempDir()}, &out, &errOut)
	if err != nil || !strings.Contains(errOut.String(), "sim: workflow checks: 1 seeds, ") || !strings.Contains(out.String(), " 0 violations") {
		t.Fatalf("a workflow check of the correct code returned %v:\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	err = run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "1", "-replicated", "0", "-mutant", "WorkflowRerunsSavedSteps", "-dir", t.TempDir()}, &out, &errOut)
	rerun := "-workflow 1 -seed 1 -mutant WorkflowRerunsSavedSteps"
	if err == nil || !strings.Contains(out.String(), " 1 violations") ||
		!strings.Contains(errOut.String(), "workflow seed 1: VIOLATION") || !strings.Contains(errOut.String(), rerun) {
		t.Fatalf("a workflow check with a step run again returned %v:\n%s%s", err, out.String(), errOut.String())
	}
}

// sim -replicated runs replicated worlds, prints what they reached, counts a
// violation in the summary line, and prints the command that reruns the
// failing seed with the same mutant.
func TestSimReplicatedWorldsReportAViolationWithItsRerunCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "0", "-replicated", "1", "-dir", t.TempDir()}, &out, &errOut)
	if err != nil || !strings.Contains(errOut.String(), "sim: replicated worlds: 1 seeds, ") || !strings.Contains(out.String(), " 0 violations") {
		t.Fatalf("a replicated world of the correct code returned %v:\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	err = run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "0", "-replicated", "1", "-mutant", "ReplicaStampsOwnClock", "-dir", t.TempDir()}, &out, &errOut)
	rerun := "-replicated 1 -seed 1 -mutant ReplicaStampsOwnClock"
	if err == nil || !strings.Contains(out.String(), " 1 violations") ||
		!strings.Contains(errOut.String(), "replicated seed 1: VIOLATION") || !strings.Contains(errOut.String(), rerun) {
		t.Fatalf("a replicated world whose leaders stamp with their own clocks returned %v:\n%s%s", err, out.String(), errOut.String())
	}
}

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
