package main

import (
	"net/http"
	"testing"
)

// Strict query parsing: an unknown or repeated parameter, or a value that
// does not parse, answers 400; a limit or wait over its cap, 422.
func TestHTTPListAndChangesRefuseUnknownOrBadParameters(t *testing.T) {
	s := newServer(t)
	for _, path := range []string{
		"/v1/executions?state=admitted",
		"/v1/executions?status=admitted&status=failed",
		"/v1/executions?status=running",
		"/v1/executions?order=sideways",
		"/v1/executions?limit=ten",
		"/v1/executions?limit=-1",
		"/v1/executions?admittedAfter=yesterday",
		"/v1/executions?admittedBefore=2026-01-02",
		"/v1/executions?cursor=nope",
		"/v1/executions?%zz",
		"/v1/changes?since=1",
		"/v1/changes?after=-1",
		"/v1/changes?after=1&after=2",
		"/v1/changes?wait=forever",
		"/v1/changes?wait=-1s",
	} {
		s.expect("GET", path, "", http.StatusBadRequest, "INVALID_ARGUMENT")
	}
	// Over a limit: 422, as every limit.
	for _, path := range []string{"/v1/executions?limit=1001", "/v1/changes?limit=2000", "/v1/changes?wait=61s"} {
		s.expect("GET", path, "", http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")
	}
}
