package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/execstore/execstore/examples/shop/chargeorder"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "the store's data directory (default: a temporary directory, removed afterwards)")
	wait := fs.Duration("wait", 2*time.Second, "how long charge-order waits before charging (the story's ten minutes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *wait <= 0 {
		return fmt.Errorf("--wait %v must be positive", *wait)
	}
	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "shop-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	fmt.Fprintf(stdout, "The shop's story, with its store in %s.\n", dir)
	return chargeorder.RunDemo(context.Background(), chargeorder.DemoOptions{Dir: dir, Wait: *wait, Out: stdout})
}
