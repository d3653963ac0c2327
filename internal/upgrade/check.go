package upgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/repo"
	"github.com/muster-tool/muster/spool"
)

// CheckArgs are the arguments the running muster gives a newly installed
// one for its self-check. They are part of the contract between versions:
// every muster must accept them.
func CheckArgs(config, state, spoolLocation string) []string {
	args := []string{"apply", "--self-check", "--config", config, "--state", state}
	if spoolLocation != "" {
		args = append(args, "--spool", spoolLocation)
	}
	return args
}

// maxCheckOutput bounds what a failed check's message carries of the
// binary's output.
const (
	maxCheckLines = 5
	maxCheckBytes = 600
)

// CheckError is a failed self-check.
type CheckError struct {
	Binary string
	// What went wrong: "exit status 1", "killed by signal ...", "did
	// not finish within 1m0s", "does not execute here: exec format error".
	What string
	// Said is the first lines of the binary's standard error (or, when
	// that is empty, of its standard output).
	Said string
}

func (e *CheckError) Error() string {
	var s string
	switch {
	case strings.HasPrefix(e.What, "does not execute"):
		s = e.Binary + " " + e.What
	default:
		s = e.Binary + " failed its self-check: " + e.What
	}
	if e.Said != "" {
		s += ": " + e.Said
	}
	return s
}

// RunCheck runs binary once with args and returns nil only if it exited
// 0 within timeout; otherwise a *CheckError that says why, in words a
// report can carry.
func RunCheck(ctx context.Context, binary string, args []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = checkEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err == nil {
		return nil
	}
	ce := &CheckError{Binary: binary, Said: firstLines(stderr.Bytes())}
	if ce.Said == "" {
		ce.Said = firstLines(stdout.Bytes())
	}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		ce.What = fmt.Sprintf("did not finish within %s", timeout)
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ce.What = fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		} else {
			ce.What = fmt.Sprintf("exit status %d", exitErr.ExitCode())
		}
	default:
		// exec could not start it: wrong architecture, not executable,
		// missing interpreter or loader.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		ce.What = fmt.Sprintf("does not execute here: %v", err)
	}
	return ce
}

// checkEnv is the environment of the check: this one, without what would
// steer the new muster elsewhere than the flags say.
func checkEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MUSTER_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func firstLines(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
		if len(lines) == maxCheckLines {
			break
		}
	}
	s := strings.Join(lines, "; ")
	if len(s) > maxCheckBytes {
		s = s[:maxCheckBytes] + " …"
	}
	return s
}

// Checked is what a self-check found.
type Checked struct {
	// Generation is the newest generation declared for this node, 0 when
	// none is.
	Generation uint64
	// Resources in that generation's declaration.
	Resources int
	// RepositoryIndex is the newest package repository index in the
	// spool, 0 when there is none.
	RepositoryIndex uint64
}

// SelfCheck is what a newly installed muster does once, run by the muster
// that installed it (muster apply --self-check): with the host config and
// identity already loaded (which reads the config file and the keys), it
// opens the spool, verifies, decodes and validates this node's newest
// declaration, and verifies the spool's package repository index if there is one. It
// writes nothing, and takes no lock: the apply that runs it holds the
// lock.
func SelfCheck(ctx context.Context, cfg *host.Config, id *host.Identity) (*Checked, error) {
	sp, err := spool.Open(cfg.Spool)
	if err != nil {
		return nil, err
	}
	meshSign, err := id.Mesh.Verifier()
	if err != nil {
		return nil, err
	}
	nodeID := id.NodeID()
	hist, err := generation.LoadHistory(ctx, sp, meshSign)
	if err != nil {
		return nil, err
	}
	res := &Checked{}
	// Commits that do not verify are skipped, as apply skips them.
	err = hist.Each(ctx, func(c *generation.Commit) (bool, error) {
		g := c.Generation
		name := spool.DeclName(g, c.Run, nodeID)
		data, err := sp.Get(ctx, name, 0)
		if errors.Is(err, spool.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		var nd generation.NodeDeclaration
		if err := bundle.OpenTOML(data, generation.DeclCtx(g, c.Run, nodeID), id.Pair.Age, meshSign, &nd); err != nil {
			return false, fault.New(fault.Refused, fmt.Errorf("declaration %s refused: %w", name, err))
		}
		if nd.NodeID != nodeID || nd.Generation != g {
			return false, fault.Refusedf("declaration %s refused: it is addressed to node %s, generation %d", name, nd.NodeID, nd.Generation)
		}
		// A muster that would refuse the declaration it is to apply
		// must not be installed.
		if err := nd.Validate(); err != nil {
			return false, fault.Refusedf("declaration of generation %d refused: %w", g, err)
		}
		res.Generation, res.Resources = g, len(nd.Resources)
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	x, err := repo.ReadIndexes(ctx, sp, meshSign)
	if err != nil {
		return nil, err
	}
	if x.Newest != nil {
		res.RepositoryIndex = x.Newest.Seq
	}
	return res, nil
}
