//go:build labfault_selfcheck || labfault_crash

package main

import (
	"fmt"
	"os"
	"slices"
)

// Faults the lab (internal/lab) builds into versions of muster that must
// be caught on a real host: with the tag labfault_selfcheck, the self-check
// fails; with labfault_crash, the self-check passes but every other apply
// crashes as it starts (a Go panic, exit status 2). Release builds have
// neither tag, and this file is not compiled into them.
func init() {
	if len(os.Args) < 2 || os.Args[1] != "apply" {
		return
	}
	selfCheck := slices.Contains(os.Args, "--self-check")
	if selfCheck && labfaultSelfCheck {
		fmt.Fprintln(os.Stderr, "muster: error: this build fails its self-check on purpose (tag labfault_selfcheck)")
		os.Exit(1)
	}
	if !selfCheck && labfaultCrash {
		panic("this build crashes on every apply on purpose (tag labfault_crash)")
	}
}
