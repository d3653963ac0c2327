package resource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/outcome"
)

// # Validating a file before it replaces the old one
//
// A file whose spec has Validate gets its new content staged as usual
// (atomicfile.Batch.Add: a temp file beside the target, with its final mode
// and owner), and then the command runs with every "%s" in its words
// replaced by the temp file's path as this machine sees it (under Root).
// Only a command that exits 0 lets the rename happen. Any other end (a
// status other than 0, a signal, no such program, ValidateTimeout passed)
// drops the staged file, so the old file stays in place, fails the line
// with the command's status and the first lines of its output, and keeps
// every service whose RestartOn names the path from restarting in this run.
//
// The command is executed directly, never through a shell, unless the spec
// says ValidateShell; then its one string is given to /bin/sh -c with %s
// replaced by the path quoted for the shell. It runs in a process group of
// its own, with standard input from /dev/null, in "/", with apply's
// environment; when its time is up the whole group is killed.
//
// What the command prints goes into the line's detail only in part: at
// most validateLines lines and validateBytes bytes, control characters
// escaped, the temp file's path written as the declared path. Nothing of
// it is shown for a Secret file, and any line that holds a line of any
// secret file's content in the same run is withheld, so that a validator
// that quotes what it read (an included key file) cannot carry a secret
// into a report.

// ValidateTimeout bounds one validate command's run.
const ValidateTimeout = 30 * time.Second

// validateTimeout is ValidateTimeout, shortened by tests.
var validateTimeout = ValidateTimeout

const (
	validateLines = 5
	validateBytes = 400
	outputKept    = 64 << 10 // what is kept of a command's output at all
	// secretLineMin: shorter lines of secret content ("}", "---") are
	// not looked for in the output; they would withhold everything.
	secretLineMin = 6
)

// validate runs the spec's validate command on the staged entry e in
// directory d. It returns nil when the command exits 0.
func (r *run) validate(it *item, d *os.File, e *atomicfile.Entry) error {
	s := it.spec
	root, err := filepath.Abs(r.s.Root)
	if err != nil {
		return err
	}
	staged := filepath.Join(root, d.Name(), e.TempName())
	argv := validateArgv(s, staged)
	ctx, cancel := context.WithTimeout(r.ctx, validateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	out := &capped{max: outputKept}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	shown := strconv.Quote(strings.Join(s.Validate, " "))
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case r.ctx.Err() != nil:
		return fmt.Errorf("not applied: %w", r.ctx.Err())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("new content refused: validate %s did not finish within %s and was killed (%s left as it was)", shown, validateTimeout, s.Path)
	case errors.As(err, &ee):
		status := "exited with status " + strconv.Itoa(ee.ExitCode())
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = "was killed by signal " + ws.Signal().String()
		}
		return fmt.Errorf("new content refused: validate %s %s (%s left as it was)%s", shown, status, s.Path, r.validateOutput(it, out.Bytes(), staged))
	default:
		return fmt.Errorf("new content refused: validate %s could not run: %v (%s left as it was)", shown, err, s.Path)
	}
}

// validateArgv is the command line of a spec's validate, for the staged
// file at path.
func validateArgv(s *Spec, path string) []string {
	if s.ValidateShell {
		return []string{"/bin/sh", "-c", strings.ReplaceAll(s.Validate[0], "%s", shellQuote(path))}
	}
	argv := make([]string, len(s.Validate))
	for i, w := range s.Validate {
		argv[i] = strings.ReplaceAll(w, "%s", path)
	}
	return argv
}

// shellQuote quotes s as one word for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// validateOutput is what a failed line shows of a validate command's
// output, to end its line's detail: its first lines, as the doc above
// says.
func (r *run) validateOutput(it *item, out []byte, staged string) string {
	if it.spec.Secret {
		return "; its output is not shown: the file is secret"
	}
	secrets := r.secretLines()
	var lines []string
	size := 0
	for raw := range strings.SplitSeq(string(out), "\n") {
		line := strings.TrimSpace(strings.ReplaceAll(raw, staged, it.spec.Path))
		if line == "" {
			continue
		}
		for _, sl := range secrets {
			if strings.Contains(line, sl) {
				line = "(a line that quotes secret content is not shown)"
				break
			}
		}
		line = outcome.Printable(line)
		if len(lines) == validateLines || size+len(line) > validateBytes {
			lines = append(lines, "…")
			break
		}
		lines = append(lines, line)
		size += len(line)
	}
	if len(lines) == 0 {
		return "; no output"
	}
	return "; output: " + strings.Join(lines, " / ")
}

// secretLines lists the lines of every secret file's content in the run
// that are long enough to look for, computed once.
func (r *run) secretLines() []string {
	if r.secrets != nil {
		return r.secrets
	}
	r.secrets = []string{}
	for _, it := range r.items {
		if it.spec.Kind != File || !it.spec.Secret {
			continue
		}
		for l := range strings.SplitSeq(it.content, "\n") {
			if l = strings.TrimSpace(l); len(l) >= secretLineMin {
				r.secrets = append(r.secrets, l)
			}
		}
	}
	return r.secrets
}

// capped keeps the first max bytes written to it and drops the rest, so a
// command that prints without end costs bounded memory.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
