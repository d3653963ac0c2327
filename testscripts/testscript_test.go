// Package testscripts runs the end-to-end scenarios in this directory, one
// user story per .txtar file, against the real muster binary.
package testscripts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/muster-tool/muster/internal/cli"
	"github.com/muster-tool/muster/internal/testutil/s3server"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"muster": func() {
			os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, params(t, ".", nil))
}

// TestScriptsS3 runs the scenarios in s3/ against a real S3 server on
// loopback: each script gets a fresh bucket, named in $S3SPOOL.
func TestScriptsS3(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	testscript.Run(t, params(t, "s3", func(env *testscript.Env) error {
		env.Setenv("S3SPOOL", srv.BucketURL(srv.NewBucket(), "spool"))
		for _, k := range s3server.EnvNames {
			env.Setenv(k, os.Getenv(k))
		}
		return nil
	}))
}

func params(t *testing.T, dir string, setup func(*testscript.Env) error) testscript.Params {
	return testscript.Params{
		Dir: dir,
		// The scripts' work directories go in the test's own: testscript
		// removes the directory it makes only after the last script, and
		// with -run choosing some scripts that never comes.
		WorkdirRoot:         t.TempDir(),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		// [root]: the script runs as root, as tools that chroot into
		// --root (useradd and its kin) need.
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			// Nothing from the caller's environment may steer muster.
			env.Setenv("MUSTER_SPOOL", "")
			env.Setenv("MUSTER_MESH", "")
			if setup != nil {
				return setup(env)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exits N CMD [ARGS...] runs CMD and checks its exit status is
			// exactly N (testscript's exec only knows zero and non-zero).
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exits STATUS COMMAND [ARGS...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exits: bad status %q", args[0])
				}
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("exits: %v", err)
				}
				if got != want {
					ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
				}
			},
		},
	}
}
