package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/fleet"
)

// htmlFlag is report's page.
var htmlFlag = formatFlag{htmlFormat, "write the rollout as one self-contained HTML page to `FILE` (- for standard output)"}

// checkPageFlags refuses the flags of the page given without it, or with
// what it cannot go with.
func checkPageFlags(f format, o *reportOptions) error {
	if o.History && f == htmlFormat {
		return fault.WithHint(fault.Usagef("--history and --html exclude each other"), "the page charts the last generations itself (--last N)")
	}
	if o.Last != 0 && f != htmlFormat {
		return fault.Usagef("--last is for the page: give it with --html FILE")
	}
	return nil
}

// writeReport writes view v (or with --history the history) in format f:
// the page to the file --html names, the other formats to standard output.
func writeReport(env *Env, f format, o reportOptions, st *fleet.State, v *fleet.View, hist []fleet.HistoryEntry, sel fleet.Selection) error {
	if f == htmlFormat {
		return writePage(env, st, o, v, sel)
	}
	return printReport(env.Stdio.Out, f, o, len(sel.Names) > 0, v, hist, env.Now())
}

// writePage writes the rollout page of view v, with the last generations
// up to it, to the file --html names, whole or not at all.
func writePage(env *Env, st *fleet.State, o reportOptions, v *fleet.View, sel fleet.Selection) error {
	last := int(o.Last)
	if last == 0 {
		last = fleet.PageGenerations
	}
	// Rollouts reads the manifests of earlier generations: a warning it
	// adds is said once, as the load's were.
	seen := map[string]bool{}
	for _, w := range st.Warnings {
		seen[w] = true
	}
	rs, err := st.Rollouts(env.Ctx, v.Generation, last, sel)
	for _, w := range st.Warnings {
		if !seen[w] {
			env.Warnf("%s", w)
			seen[w] = true
		}
	}
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := fleet.WriteHTML(&b, fleet.Page{View: v, Rollouts: rs, All: o.All, Made: env.Now(), Ago: ago}); err != nil {
		return err
	}
	path := o.Output.file(htmlFormat)
	if path == "-" {
		_, err := env.Stdio.Out.Write(b.Bytes())
		return err
	}
	if err := atomicfile.WriteFile(path, b.Bytes(), 0o644); err != nil {
		// The path in the error is of the temporary file beside the page.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fault.WithHint(fmt.Errorf("--html %s: %w", path, err), "give a file in a directory you can write to, or - for standard output")
	}
	return nil
}

// countFlag is a count of 1 or more, 0 when not given.
type countFlag int

func (c *countFlag) String() string {
	if *c == 0 {
		return ""
	}
	return strconv.Itoa(int(*c))
}

func (c *countFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("want a number, 1 or more")
	}
	*c = countFlag(n)
	return nil
}

func (c *countFlag) Type() string { return "int" }
