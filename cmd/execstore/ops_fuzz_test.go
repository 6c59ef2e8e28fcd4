package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// Whatever Authorization header and X-Request-ID a client sends, a route
// that needs the token is served exactly when the header is "Bearer" (in
// any case) and the token, and the request ID sent back is the client's
// only when it is a short, plain token.
func FuzzAuthorizationAndRequestIDHeaders(f *testing.F) {
	for _, seed := range [][2]string{
		{"Bearer " + testToken, "abc"}, {"bearer " + testToken, ""}, {"BEARER  " + testToken + " ", "x y"},
		{"Bearer", "\n"}, {"Basic " + testToken, strings.Repeat("a", 65)}, {testToken, "ok-id_1.2"},
		{"Bearer " + testToken + "x", "é"}, {"Bearer \x00", "\x00"},
	} {
		f.Add(seed[0], seed[1])
	}
	store, err := execstore.Open(f.TempDir(), execstore.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	h := newHandler(store, slog.New(slog.DiscardHandler), serveConfig{token: testToken})
	f.Fuzz(func(t *testing.T, auth, id string) {
		req := httptest.NewRequest("GET", "/v1/stats", nil)
		req.Header["Authorization"] = []string{auth}
		req.Header["X-Request-Id"] = []string{id}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		scheme, given, _ := strings.Cut(auth, " ")
		want := strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(given) == testToken
		if got := rec.Code != http.StatusUnauthorized; got != want {
			t.Fatalf("Authorization %q: %d, served=%t want %t", auth, rec.Code, got, want)
		}
		if got := rec.Header().Get("X-Request-ID"); got == "" || (got == id) != validRequestID(id) {
			t.Fatalf("X-Request-ID %q answered %q", id, got)
		}
	})
}

// Whatever query a client gives the web view's list, it answers a page
// (a bad filter or cursor is said on the page) in which the query's values
// appear only escaped.
func FuzzWebViewListQuery(f *testing.F) {
	for _, seed := range []string{
		"status=failed", "status=bogus", "workflow=<script>", "order=newest&cursor=AAAA", "cursor=%ff%fe",
		"parent=x&status=admitted&workflow=w", "status=&workflow=&order=", "status=failed&status=admitted",
	} {
		f.Add(seed)
	}
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, err := execstore.Open(f.TempDir(), execstore.Options{NoSync: true, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	for _, id := range []string{"a", "b", "c"} {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	h := newHandler(store, slog.New(slog.DiscardHandler), serveConfig{})
	f.Fuzz(func(t *testing.T, query string) {
		if _, err := url.ParseQuery(query); err != nil {
			return // net/http would have refused the request line
		}
		req := httptest.NewRequest("GET", "/ui/f/executions", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("?%s: %d %s", query, rec.Code, rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), "<script") {
			t.Fatalf("?%s: markup in the page:\n%s", query, rec.Body.String())
		}
	})
}
