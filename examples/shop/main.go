package main

import (
	"fmt"
	"io"
	"os"

	"github.com/execstore/execstore/examples/shop/chargeorder"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	return chargeorder.Command("shop", args, stdout, stderr)
}
