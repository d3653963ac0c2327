package cli

import (
	"fmt"
	"runtime"
)

func cmdVersion() *Command {
	return &Command{
		Name:  "version",
		Usage: "muster version",
		Short: "print muster's version",
		Long: `Print the version of this muster binary, the Go version it was built with, and
its platform.`,
		Examples: "muster version",
		Exits:    []int{ExitUsage},
		Run:      runVersion,
	}
}

// runVersion prints the version, the Go version and the platform.
func runVersion(env *Env, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdio.Out, "muster %s (%s, %s/%s)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
