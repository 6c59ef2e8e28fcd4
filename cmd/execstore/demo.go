package main

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

	"github.com/execstore/execstore/examples/shop/chargeorder"
)

// demoCommand runs the shop's story from RFC 001 with a real store, the
// dispatcher and the workflow package, on the system clock with a short wait:
//
//	execstore demo [--data DIR] [--wait 2s] [--verbose]
//
// Order 42 triggers charge-order as order-42; a repeated trigger is refused;
// the wait passes and the card is charged once; a reused ID for an added
// item is refused, and order-42-2 charges it. The story goes to stdout, step
// by step; with --verbose the store's and dispatcher's logs go to stderr.
// Without --data the store lives in a temporary directory, removed
// afterwards.
func demoCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "the store's data directory (default: a temporary directory, removed afterwards)")
	wait := fs.Duration("wait", 2*time.Second, "how long charge-order waits before charging (the story's ten minutes)")
	verbose := fs.Bool("verbose", false, "log the store's and the dispatcher's work to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *wait <= 0 {
		return fmt.Errorf("--wait %v must be positive", *wait)
	}
	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "execstore-demo-")
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
	fmt.Fprintf(stdout, "The shop's story, with its store in %s and a %v wait.\n", dir, *wait)
	return chargeorder.RunDemo(ctx, chargeorder.DemoOptions{Dir: dir, Wait: *wait, Out: stdout, Logger: logger})
}
