package main

import (
	"bytes"
	"strings"
	"testing"
)

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
