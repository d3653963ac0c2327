// Command muster declares desired state once and lets every host apply it,
// verify it and report. See muster(1).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/muster-tool/muster/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels ctx, and every command stops
	// at its next safe point; a second one ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	code := cli.Main(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
