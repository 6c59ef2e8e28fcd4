package replica

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestRaftMessagesReachSlogWithTheirLevelNameAndArguments(t *testing.T) {
	var buf bytes.Buffer
	l := newSlogLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	named := l.Named("raft").Named("transport").With("peer", "n1")
	named.Warn("append failed", "index", 7)
	named.Debug("not written at Info")
	named.Log(hclog.Off, "never written")
	out := buf.String()
	for _, want := range []string{"level=WARN", `msg="append failed"`, "logger=raft.transport", "peer=n1", "index=7"} {
		if !strings.Contains(out, want) {
			t.Fatalf("%q lacks %q", out, want)
		}
	}
	if strings.Count(out, "logger=") != 1 {
		t.Fatalf("the name is written more than once: %q", out)
	}
	if strings.Contains(out, "not written") || strings.Contains(out, "never written") {
		t.Fatalf("a message below the handler's level was written: %q", out)
	}
	if named.IsDebug() || !named.IsInfo() || named.GetLevel() != hclog.Info || named.Name() != "raft.transport" {
		t.Fatalf("levels: debug %v info %v level %v name %q", named.IsDebug(), named.IsInfo(), named.GetLevel(), named.Name())
	}
}
