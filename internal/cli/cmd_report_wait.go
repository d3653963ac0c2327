package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/mesh"
)

// waitOptions are the flags of report --wait: a pipeline's gate.
type waitOptions struct {
	Wait     bool
	Until    string
	Timeout  time.Duration
	Interval time.Duration
	target   fleet.Target
}

// defaultInterval is how often --wait looks at the spool: each look lists
// the reports and reads only the new ones.
const defaultInterval = 10 * time.Second

func (o *waitOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Wait, "wait", false, "wait until --until holds for the nodes assigned the generation, a node fails, or --timeout passes")
	fs.StringVar(&o.Until, "until", "all-applied", "with --wait, wait until `TARGET`: applied=N, applied=P% (of the nodes assigned the generation) or all-applied")
	fs.DurationVar(&o.Timeout, "timeout", 0, "with --wait, stop waiting after `DURATION` (default: no limit)")
	fs.DurationVar(&o.Interval, "interval", defaultInterval, "with --wait, look at the spool every `DURATION`")
}

// check refuses wait flags without --wait and values it cannot use, and
// parses the target.
func (o *waitOptions) check(env *Env, history bool) error {
	if !o.Wait {
		for _, f := range []string{"until", "timeout", "interval"} {
			if env.Changed(f) {
				return fault.Usagef("--%s needs --wait", f)
			}
		}
		return nil
	}
	if history {
		return fault.Usagef("--wait and --history exclude each other")
	}
	if o.Timeout < 0 {
		return fault.Usagef("--timeout %s: want a positive duration such as 30m", o.Timeout)
	}
	if o.Interval <= 0 {
		return fault.Usagef("--interval %s: want a positive duration such as 10s", o.Interval)
	}
	t, err := fleet.ParseTarget(o.Until)
	o.target = t
	return err
}

// runReportWait waits on generation gen (0: the newest when it starts)
// until the target holds for the nodes in scope (those of sel the
// generation was assigned to), a node in scope fails, or the timeout
// passes, then prints the report as runReport does. It exits 0 when the
// target holds; with the failed status as soon as a node in scope fails
// (unless --fail-on none); at the timeout, with the outstanding status
// (--fail-on outstanding, the default with --wait) or 0. Outstanding is
// never taken for failed.
func runReportWait(env *Env, o reportOptions, f format, m *mesh.Mesh, reg *enrol.Registry, st *fleet.State, sel fleet.Selection) error {
	gen := uint64(o.Generation)
	if gen == 0 {
		gen = st.Newest()
	}
	w := &waiter{env: env, o: o, gen: gen, warned: map[string]bool{}, start: env.Now(),
		progress: newProgress(env.Stdio.Err, isTerminal(env.Stdio.Err))}
	if o.Timeout > 0 {
		w.deadline = w.start.Add(o.Timeout)
	}
	defer w.progress.clear()
	for {
		v, err := st.Generation(env.Ctx, gen, sel)
		// The load's warnings and the look's (a manifest that cannot be
		// read), each once: a refresh starts the list afresh.
		w.warn(st.Warnings)
		if err != nil {
			return err
		}
		if err := fleet.SortNodes(v.Nodes, o.Sort); err != nil {
			return err
		}
		p := o.target.Progress(v)
		if err := p.Reachable(gen); err != nil {
			return err
		}
		if done, err := w.look(v, p); done {
			w.progress.clear()
			warnObjects(env, st, v, o.All)
			if perr := writeReport(env, f, o, st, v, nil, sel); perr != nil {
				return perr
			}
			return err
		}
		if st, err = w.refresh(m, reg, st); err != nil {
			return err
		}
	}
}

// waiter is one report --wait.
type waiter struct {
	env      *Env
	o        reportOptions
	gen      uint64
	start    time.Time
	deadline time.Time // zero: no timeout
	progress *progress
	prev     *fleet.View
	warned   map[string]bool
	newer    bool // a newer generation was committed while waiting
}

// warn prints each warning once in the whole wait.
func (w *waiter) warn(ws []string) {
	for _, s := range ws {
		if !w.warned[s] {
			w.warned[s] = true
			w.progress.clear()
			w.env.Warnf("%s", s)
		}
	}
}

// look shows the progress of view v and decides whether the wait is
// over, and with which result.
func (w *waiter) look(v *fleet.View, p fleet.Progress) (bool, error) {
	now := w.env.Now()
	if v.Newest > w.gen && !w.newer {
		w.newer = true
		w.progress.clear()
		w.env.Warnf("generation %d was committed while waiting on generation %d: a node that applies it without applying %d first stays outstanding on %d",
			v.Newest, w.gen, w.gen, w.gen)
	}
	w.progress.show(w.prev, v, p, w.timing(now))
	w.prev = v
	switch {
	case p.Failed > 0 && w.o.FailOn != "none":
		var failed []string
		for _, n := range v.Nodes {
			if n.Status == fleet.Failed {
				failed = append(failed, n.Name)
			}
		}
		return true, closing(fault.NodesFailed, fmt.Sprintf("%s generation %d: stopped waiting", failedWho(failed), w.gen))
	case p.Holds():
		fmt.Fprintf(w.env.Stdio.Err, "muster: %s holds: %d of the %d nodes assigned generation %d applied it\n", p.Target, p.Applied, p.Assigned, w.gen)
		return true, nil
	case !w.deadline.IsZero() && !now.Before(w.deadline):
		msg := fmt.Sprintf("timed out after %s: %s does not hold: %d of the %d nodes assigned generation %d applied it, %d outstanding, %d failed",
			w.o.Timeout, p.Target, p.Applied, p.Assigned, w.gen, p.Outstanding, p.Failed)
		if w.o.FailOn == "outstanding" && p.Outstanding > 0 {
			return true, closing(fault.NodesOutstanding, msg)
		}
		fmt.Fprintf(w.env.Stdio.Err, "muster: %s (--fail-on %s)\n", msg, w.o.FailOn)
		return true, nil
	}
	return false, nil
}

func failedWho(names []string) string {
	if len(names) == 1 {
		return names[0] + " failed"
	}
	const shown = 5
	list := strings.Join(names[:min(len(names), shown)], ", ")
	if len(names) > shown {
		list += ", ..."
	}
	return fmt.Sprintf("%d nodes failed (%s)", len(names), list)
}

// timing says how long the wait has run, and how long it has left.
func (w *waiter) timing(now time.Time) string {
	s := "waited " + now.Sub(w.start).Round(time.Second).String()
	if !w.deadline.IsZero() {
		s += " of " + w.o.Timeout.String()
	}
	return s
}

// refresh sleeps until the next look and reads what is new. A spool that
// cannot be read for a while (a temporary failure) is waited out until
// the timeout; the state a failed read leaves is dropped and loaded
// afresh.
func (w *waiter) refresh(m *mesh.Mesh, reg *enrol.Registry, st *fleet.State) (*fleet.State, error) {
	for {
		if err := w.sleep(); err != nil {
			return nil, err
		}
		var err error
		if st == nil {
			st, err = fleet.Load(w.env.Ctx, m, reg, fleet.Options{CacheDir: filepath.Join(m.Dir, "cache")})
		} else {
			err = st.Refresh(w.env.Ctx)
		}
		if err == nil {
			return st, nil
		}
		st = nil
		if fault.ClassOf(err) != fault.Temporary || w.env.Ctx.Err() != nil || !w.deadline.IsZero() && !w.env.Now().Before(w.deadline) {
			return nil, err
		}
		w.warn([]string{fmt.Sprintf("%v; trying again", err)})
	}
}

// sleep waits for the next look: an interval, or less when the timeout
// comes first. A signal ends it.
func (w *waiter) sleep() error {
	d := w.o.Interval
	if !w.deadline.IsZero() {
		d = min(d, max(w.deadline.Sub(w.env.Now()), 0))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.env.Ctx.Done():
		return w.env.Ctx.Err()
	case <-t.C:
		return nil
	}
}

// progress shows a wait's progress on standard error: on a terminal, one
// line rewritten in place; otherwise a line when the wait starts and one
// per node whose status changes, for a pipeline's log.
type progress struct {
	w        io.Writer
	terminal bool
	shown    bool // a line is on the terminal
}

func newProgress(w io.Writer, terminal bool) *progress {
	return &progress{w: w, terminal: terminal}
}

// show shows view v, whose nodes were in prev's statuses at the last look
// (nil: this is the first).
func (pr *progress) show(prev, v *fleet.View, p fleet.Progress, timing string) {
	counts := fmt.Sprintf("%d of %d applied, %d outstanding, %d failed (%s needs %d)", p.Applied, p.Assigned, p.Outstanding, p.Failed, p.Target, p.Need)
	if pr.terminal {
		fmt.Fprintf(pr.w, "\r\x1b[Kmuster: generation %d: %s; %s", v.Generation, counts, timing)
		pr.shown = true
		return
	}
	if prev == nil {
		fmt.Fprintf(pr.w, "muster: waiting on generation %d: %s\n", v.Generation, counts)
		return
	}
	for _, n := range fleet.Changed(prev, v) {
		what := fmt.Sprintf("is %s on generation %d", n.Status, v.Generation)
		switch n.Status {
		case fleet.Applied:
			what = fmt.Sprintf("applied generation %d", v.Generation)
		case fleet.Failed:
			what = fmt.Sprintf("failed generation %d (%s)", v.Generation, linesText(n.FailedLines, "; "))
		}
		fmt.Fprintf(pr.w, "muster: %s %s; %s\n", n.Name, what, counts)
	}
}

// clear takes the progress line off the terminal, so that what follows
// starts on a line of its own.
func (pr *progress) clear() {
	if pr.shown {
		fmt.Fprint(pr.w, "\r\x1b[K")
		pr.shown = false
	}
}
