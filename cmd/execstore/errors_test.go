package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/vfs"
)

// Every code statusOf gives a store error, with its status, is one of
// errorCodes, the list the document's error codes are checked against.
func TestEveryStoreErrorAnswersAListedCodeAndStatus(t *testing.T) {
	errs := []error{execstore.ErrExecutionIDConflict, execstore.ErrInvalidExecutionEvent, execstore.ErrExecutionNotFound,
		execstore.ErrLeaseLost, execstore.ErrStartRequestMismatch, execstore.ErrClosed, execstore.ErrInvalidArgument,
		execstore.ErrLimitExceeded, execstore.ErrStorageFailed, execstore.ErrScheduleNotFound,
		context.Canceled, context.DeadlineExceeded, errors.New("a bug")}
	for _, err := range errs {
		code, status := statusOf(err)
		if !slices.Contains(errorCodes[code], status) {
			t.Errorf("%v answers %d %s, which errorCodes does not list", err, status, code)
		}
	}
}

// The statuses docs/http.md gives the store's own errors: LIMIT_EXCEEDED
// answers 422; a store that failed answers every write, and /healthz, with
// 503 STORAGE_FAILED (reads still answer); a closed store answers every
// request with 503 CLOSED; an await that runs out of time answers 408.
func TestHTTPStatusesOfTheStoresOwnErrors(t *testing.T) {
	type request struct {
		method, path, body string
		status             int
		code               string
	}
	cases := []struct {
		name     string
		setup    func(t *testing.T) *server
		requests []request
	}{
		{"a per-execution limit", func(t *testing.T) *server {
			s := newServer(t)
			s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
			for i := range execstore.MaxWatchesPerExecution {
				if _, err := s.store.Watch(context.Background(), "e", fmt.Sprint("k", i)); err != nil {
					t.Fatal(err)
				}
			}
			return s
		}, []request{{"POST", "/v1/executions/e/watches", `{"keys":["one more"]}`, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED"}}},
		{"a failed store", func(t *testing.T) *server {
			var broken atomic.Bool
			// The log's write fails once broken: any write to a file of the store's log.
			fs := vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
				if broken.Load() && op.Kind == vfs.OpWrite && filepath.Base(filepath.Dir(op.Path)) == "wal" {
					return errors.New("injected write failure")
				}
				return nil
			})
			s := newServerWith(t, execstore.Options{NoSync: true, FS: fs})
			s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
			broken.Store(true)
			s.expect("POST", "/v1/store/commit", `{"writes":[{"key":"k","value":1}]}`, http.StatusServiceUnavailable, "STORAGE_FAILED")
			return s
		}, []request{
			{"POST", "/v1/executions", `{"workflowId":"w"}`, http.StatusServiceUnavailable, "STORAGE_FAILED"},
			{"POST", "/v1/executions/e/wakes", `{"at":"2026-01-02T13:00:00Z"}`, http.StatusServiceUnavailable, "STORAGE_FAILED"},
			{"POST", "/v1/claims", `{"limit":1,"leaseDurationMs":1000}`, http.StatusServiceUnavailable, "STORAGE_FAILED"},
			{"GET", "/healthz", "", http.StatusServiceUnavailable, "STORAGE_FAILED"},
			{"GET", "/v1/executions/e", "", http.StatusOK, ""},
		}},
		{"a closed store", func(t *testing.T) *server {
			s := newServer(t)
			s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
			s.store.Close()
			return s
		}, []request{
			{"POST", "/v1/executions", `{"workflowId":"w"}`, http.StatusServiceUnavailable, "CLOSED"},
			{"GET", "/v1/executions/e", "", http.StatusServiceUnavailable, "CLOSED"},
			{"GET", "/v1/stats", "", http.StatusServiceUnavailable, "CLOSED"},
			{"GET", "/healthz", "", http.StatusServiceUnavailable, "CLOSED"},
		}},
		{"an await that runs out of time", func(t *testing.T) *server {
			s := newServer(t)
			s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
			return s
		}, []request{{"GET", "/v1/executions/e/await?timeout=1ms", "", http.StatusRequestTimeout, "TIMEOUT"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.setup(t)
			for _, r := range c.requests {
				s.expect(r.method, r.path, r.body, r.status, r.code)
			}
		})
	}
}

// leaseLostAndNotFound is an error that matches both sentinels but carries
// LEASE_LOST as its own code: the answer must not hang on which of the two
// an error happens to name first.
type leaseLostAndNotFound struct{}

func (leaseLostAndNotFound) Error() string { return "execstore: lease lost: no such execution" }

func (leaseLostAndNotFound) Code() string { return "LEASE_LOST" }

func (leaseLostAndNotFound) Unwrap() []error {
	return []error{execstore.ErrLeaseLost, execstore.ErrExecutionNotFound}
}

func TestHTTPAnErrorMatchingExecutionNotFoundIs404EvenIfTheLeaseIsLostToo(t *testing.T) {
	a := &api{logger: slog.New(slog.DiscardHandler)}
	rec := httptest.NewRecorder()
	a.fail(rec, leaseLostAndNotFound{})
	var out map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusNotFound || out["code"] != "EXECUTION_NOT_FOUND" {
		t.Fatalf("answered %d %v, want 404 EXECUTION_NOT_FOUND", rec.Code, out)
	}
}
