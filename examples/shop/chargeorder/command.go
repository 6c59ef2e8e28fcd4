package chargeorder

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Command runs the story as a command line program named name: flags
// --data DIR (default: a temporary directory, removed afterwards), --wait
// (charge-order's wait, default 2s), --verbose (the store's and the
// dispatcher's logs to stderr) and --replicas N (the story on a cluster of
// N nodes, whose leader stops midway). It stops early on SIGINT or SIGTERM. Both
// examples/shop and execstore demo are this.
func Command(name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "the store's data directory (default: a temporary directory, removed afterwards)")
	wait := fs.Duration("wait", 2*time.Second, "how long charge-order waits before charging (the story's ten minutes)")
	verbose := fs.Bool("verbose", false, "log the store's and the dispatcher's work to stderr")
	replicas := fs.Int("replicas", 0, "tell the story on a cluster of this many replicated nodes on 127.0.0.1, and stop the leader while order 42 waits (2 to 9; 0: one store)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *replicas != 0 && (*replicas < 2 || *replicas > 9) {
		return fmt.Errorf("--replicas %d is outside 2..9", *replicas)
	}
	if *wait <= 0 {
		return fmt.Errorf("--wait %v must be positive", *wait)
	}
	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", name+"-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	var logger *slog.Logger
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *replicas > 0 {
		fmt.Fprintf(stdout, "The shop's story, on a cluster of %d nodes in %s, and a %v wait.\n", *replicas, dir, *wait)
	} else {
		fmt.Fprintf(stdout, "The shop's story, with its store in %s and a %v wait.\n", dir, *wait)
	}
	return RunDemo(ctx, DemoOptions{Dir: dir, Wait: *wait, Out: stdout, Logger: logger, Replicas: *replicas})
}
