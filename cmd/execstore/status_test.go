package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/wal"
)

// newServerWith serves a store opened with opts.
func newServerWith(t *testing.T, opts execstore.Options) *server {
	t.Helper()
	store, err := execstore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { ts.Close(); store.Close() })
	return &server{t: t, url: ts.URL, store: store}
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
			s := newServerWith(t, execstore.Options{NoSync: true, WALFaults: &wal.Faults{BeforeWrite: func() error {
				if broken.Load() {
					return errors.New("injected write failure")
				}
				return nil
			}}})
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

// lowerCamel is a Go field name as docs/http.md says records spell it:
// ExecutionID is "executionId".
func lowerCamel(name string) string {
	name = strings.ReplaceAll(name, "ID", "Id")
	return string(unicode.ToLower(rune(name[0]))) + name[1:]
}

// Records use the Go field names in lowerCamelCase: every field of
// execstore.Record, and of the types inside it, is in the JSON under that
// name, and nothing else is.
func TestHTTPRecordsUseTheGoFieldNamesInLowerCamelCase(t *testing.T) {
	pairs := []struct{ goType, wire reflect.Type }{
		{reflect.TypeFor[execstore.Record](), reflect.TypeFor[recordJSON]()},
		{reflect.TypeFor[execstore.Outcome](), reflect.TypeFor[outcomeJSON]()},
		{reflect.TypeFor[execstore.WorkflowError](), reflect.TypeFor[errorJSON]()},
		{reflect.TypeFor[execstore.Parent](), reflect.TypeFor[parentJSON]()},
		{reflect.TypeFor[execstore.Lease](), reflect.TypeFor[leaseJSON]()},
	}
	for _, p := range pairs {
		var want, got []string
		for f := range p.goType.Fields() {
			want = append(want, lowerCamel(f.Name))
		}
		for f := range p.wire.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			got = append(got, name)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s travels as %q, want %q", p.goType, got, want)
		}
	}
}

// A body of exactly 4 MiB is read (here to be refused by the store's value
// limit, 422, not for its size); one byte more answers 413. Both are
// LIMIT_EXCEEDED.
func TestHTTPABodyOfAtMost4MiBIsRead(t *testing.T) {
	s := newServer(t)
	body := func(size int) string {
		const open, closing = `{"writes":[{"key":"k","value":"`, `"}]}`
		return open + strings.Repeat("x", size-len(open)-len(closing)) + closing
	}
	s.expect("POST", "/v1/store/commit", body(4<<20), http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")
	s.expect("POST", "/v1/store/commit", body(4<<20+1), http.StatusRequestEntityTooLarge, "LIMIT_EXCEEDED")
}
