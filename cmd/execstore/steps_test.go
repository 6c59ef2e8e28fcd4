package main

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
)

// "A step save of a key already saved answers with the value that is kept."
func TestHTTPASavedStepKeyAnswersTheKeptValueNotApplied(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	out := s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":{"receipt":"r-1"}}`, 200, "")
	if out["applied"] != true || fmt.Sprint(out["value"]) != "map[receipt:r-1]" {
		t.Fatalf("first save: %v", out)
	}
	out = s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":{"receipt":"r-2"}}`, 200, "")
	if out["applied"] != false || fmt.Sprint(out["value"]) != "map[receipt:r-1]" {
		t.Fatalf("second save: %v, want the first value with applied false", out)
	}
}

// A save repeated with the same content (a retry after a lost answer) reads
// as the save it repeats: applied, marked replayed. Key order and spacing
// do not make two contents differ; a different value still is not applied.
func TestHTTPARepeatedStepSaveIsAReplay(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	out := s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":{"receipt":"r-1","total":16}}`, 200, "")
	if out["applied"] != true || out["replayed"] != nil {
		t.Fatalf("first save: %v, want applied and no replayed", out)
	}
	for _, again := range []string{`{"receipt":"r-1","total":16}`, `{ "total": 16, "receipt": "r-1" }`} {
		out = s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":`+again+`}`, 200, "")
		if out["applied"] != true || out["replayed"] != true {
			t.Fatalf("repeated save %s: %v, want applied and replayed", again, out)
		}
	}
	out = s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":{"receipt":"r-2","total":16}}`, 200, "")
	if out["applied"] != false || out["replayed"] != nil {
		t.Fatalf("a different value: %v, want not applied", out)
	}
}

// GET /v1/executions/{id}/steps lists the saved steps in key order, a page
// at a time; "next" names the key to continue after while more remain.
func TestHTTPStepsAreListedInPages(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	for _, k := range []string{"c", "a", "b"} {
		s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"`+k+`","value":"`+k+k+`"}`, 200, "")
	}
	page := s.expect("GET", "/v1/executions/e/steps?limit=2", "", 200, "")
	if fmt.Sprint(page["steps"]) != "[map[key:a value:aa] map[key:b value:bb]]" || page["next"] != "b" {
		t.Fatalf("first page: %v", page)
	}
	page = s.expect("GET", "/v1/executions/e/steps?limit=2&after=b", "", 200, "")
	if fmt.Sprint(page["steps"]) != "[map[key:c value:cc]]" || page["next"] != nil {
		t.Fatalf("last page: %v", page)
	}
	s.expect("GET", "/v1/executions/nobody/steps", "", 404, "EXECUTION_NOT_FOUND")
}

// A step not saved yet is an answer, not an error: a worker asks before
// every step it runs. An unknown execution is still 404.
func TestHTTPAStepNotSavedIsAnAnswer(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	out := s.expect("GET", "/v1/executions/e/steps/charge", "", http.StatusOK, "")
	if !reflect.DeepEqual(out, map[string]any{"saved": false}) {
		t.Fatalf("before the save: %v, want saved false alone", out)
	}
	s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":null}`, http.StatusOK, "")
	out = s.expect("GET", "/v1/executions/e/steps/charge", "", http.StatusOK, "")
	if !reflect.DeepEqual(out, map[string]any{"saved": true, "value": nil}) {
		t.Fatalf("after saving null: %v, want saved true with the value null", out)
	}
	s.expect("GET", "/v1/executions/nobody/steps/charge", "", http.StatusNotFound, "EXECUTION_NOT_FOUND")
}
