package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource/debian"
	"github.com/muster-tool/muster/internal/resource/systemd"
	"github.com/muster-tool/muster/internal/upgrade"
	"github.com/muster-tool/muster/spool"
)

// applyOptions are the flags of muster apply.
type applyOptions struct {
	DryRun    bool
	Timeout   time.Duration
	SelfCheck bool
	Output    output
}

func (o *applyOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.DryRun, "dry-run", false, "show what would change; change nothing and write no report")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "give up after this long")
	fs.BoolVar(&o.SelfCheck, "self-check", false, "check that this muster can work here and change nothing (run by the muster that installed it)")
	o.Output.addFlags(fs, formatFlag{jsonFormat, "print the lines, the counts and the generation as versioned JSON, for cron wrappers and monitoring"})
}

func cmdApply() *Command {
	var o applyOptions
	return &Command{
		Name:  "apply",
		Usage: "muster apply [--dry-run] [--json] [--timeout DURATION] [--config FILE] [--state DIR] [--spool SPOOL] [--root DIR]\nmuster apply --self-check",
		Short: "reconcile this host with its newest declaration, verify, report (host)",
		Long: `Fetch this node's newest committed declaration, verify the mesh's signature
against the key pinned at enrolment, decrypt it, reconcile every resource
(packages, then files, directories and symlinks, then services, unless the
declaration orders otherwise), read every resource back, remove orphans muster
created, and write a report signed by this host and encrypted to the mesh.

A line is ok only if reading the resource back matched the declaration; there
is no other way for a line to become ok, and one failed line makes the report
failed and the status 1. A generation older than the last one applied is
refused (rollback, status 3); re-applying the same generation repairs drift.
Another commit of the generation applied, or a newer one whose history does not
hold it, is a fork of the mesh's history and refused (status 3). Commits that
do not verify against the mesh key are skipped with a warning, never obeyed. A
generation past the expiry declare --valid-for signed into it is still
enforced, but reported as a failed line (status 1). A declaration that breaks
the rules declare holds it to (an unclean path, a control character, set-id
bits without special_bits, one path as two types) is refused whole before
anything changes (status 3), naming the generation and the entry. A report that
cannot be written to the spool waits in the state directory's outbox (status 4)
and is sent first by the next run.

Made for a systemd timer or cron: non-interactive, one summary line when
nothing changed, bounded by --timeout. --json prints one versioned document
instead (see muster-apply(1)): the generation, the counts and every line,
for a wrapper or a monitoring job; the exit status is the same. A run with
nothing new to report (no change, no failure, the same lines as the last
report sent) sends its report only once per contact interval, an hour
unless the host config's [report] contact_interval says otherwise; on S3
such a run costs one LIST request. A second apply while one runs exits at
once with status 4. Reads the host config (default /etc/muster/muster.toml)
and the state directory it names; --dry-run writes nothing of its own (where
the config's [apt] update asks, apt's package lists are updated, so that it
names the versions a run would install).

When an apply changes the installed muster package, the new binary runs once
with --self-check before this one exits: it loads the config and keys, opens
the spool and decodes this node's newest declaration, changing nothing. If it
passes, apply exits with status 7 and the new muster runs from the next apply;
if not, the line fails with the reason and the previous version is reinstalled
at once. See muster-upgrade(7).`,
		Examples: `muster apply
muster apply --dry-run
# from a cron wrapper: the failed lines
muster apply --json |
  jq -r '.lines[] | select(.status == "failed") | "\(.id): \(.detail)"'
# build an image: apply everything inside a directory tree
muster apply --root /srv/images/web --config /srv/images/web.toml`,
		Global:     []string{"spool", "config", "state", "root"},
		HostConfig: true,
		Exits:      []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary, ExitRestart},
		Flags:      o.addFlags,
		Run:        func(env *Env, args []string) error { return runApply(env, o, args) },
	}
}

// runApply reconciles this host with its newest declaration, reads every
// resource back and reports, or with --self-check only checks that it
// could.
func runApply(env *Env, o applyOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	cfg, id, err := openHost(env)
	if err != nil {
		return err
	}
	if o.SelfCheck {
		return runSelfCheck(env, o, cfg, id)
	}
	root := cfg.Root
	if root != "/" && !o.DryRun {
		// A directory tree standing for a host gets the package
		// database skeleton it needs.
		if err := debian.PrepareRoot(root); err != nil {
			return err
		}
	}
	sp, err := spool.Open(cfg.Spool)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(env.Ctx, o.Timeout)
	defer cancel()
	res, err := apply.Run(ctx, apply.Options{
		Config: cfg, Identity: id, Spool: sp, Root: root, DryRun: o.DryRun, Version: Version(), Now: env.Now,
		Packages:   debian.New(root, debian.Options{Config: cfg.Apt.Options, Update: cfg.Apt.Update}),
		Services:   systemd.New(root),
		ConfigPath: env.Global.Config,
		TuneGC:     true,
		Waiting: func(ctx context.Context) bool {
			tid, _ := host.ReadJoin(cfg.State)
			st, err := enrol.ReadJoinState(ctx, sp, id, tid)
			return err == nil && st != nil && (st.Pending || st.Refused)
		},
	})
	if res != nil {
		for _, w := range res.Warnings {
			env.Warnf("%s", w)
		}
		if err != nil && res.Report != nil {
			// The work was done: say what changed, even though the
			// report could not be kept.
			if f == jsonFormat {
				if err := writeJSON(env.Stdio.Out, applyDocument(cfg.Node, res, o.DryRun, "")); err != nil {
					return err
				}
			} else {
				printLines(env.Stdio.Out, res.Report.Lines)
			}
		}
	}
	if err != nil {
		if stopped := interrupted(ctx, o.Timeout); stopped != "" {
			return fault.Temporaryf("%s: %v", stopped, err)
		}
		return err
	}
	if res.Flushed > 0 {
		fmt.Fprintf(env.Stdio.Err, "muster: sent %d earlier report(s) from the outbox\n", res.Flushed)
	}
	if res.Nothing {
		return printNothing(ctx, env, f, sp, cfg.State, id, res)
	}
	if f == jsonFormat {
		err = writeJSON(env.Stdio.Out, applyDocument(cfg.Node, res, o.DryRun, ""))
	} else {
		printApply(env.Stdio.Out, res, o.DryRun)
	}
	if err == nil {
		err = applyStatus(env, res, o.DryRun)
	}
	if stopped := interrupted(ctx, o.Timeout); stopped != "" && res.Failed > 0 {
		// What was not done is reported as failed; the next run does
		// it.
		return fault.Temporaryf("%s; what it did not do is reported as failed", stopped)
	}
	return err
}

// runSelfCheck is apply --self-check: the new muster, run by the one that
// installed it, loads what apply would and changes nothing.
func runSelfCheck(env *Env, o applyOptions, cfg *host.Config, id *host.Identity) error {
	ctx, cancel := context.WithTimeout(env.Ctx, o.Timeout)
	defer cancel()
	c, err := upgrade.SelfCheck(ctx, cfg, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdio.Out, "self-check passed: muster %s; generation %d (%d resources); repository index %d\n", Version(), c.Generation, c.Resources, c.RepositoryIndex)
	return nil
}

// printNothing says why nothing is declared for this node: it may still
// wait to be admitted, or have been refused, which the operator of the
// host must hear of (with the refusal status) rather than read as a host
// with nothing to do.
func printNothing(ctx context.Context, env *Env, f format, sp spool.Spool, state string, id *host.Identity, res *apply.Result) error {
	newest := res.Newest
	tid, err := host.ReadJoin(state)
	if err != nil {
		// Only this message depends on it.
		env.Warnf("%v", err)
	}
	st, err := enrol.ReadJoinState(ctx, sp, id, tid)
	if err != nil {
		return err
	}
	if st != nil && st.Refused {
		return fault.WithHint(fault.Refusedf("%s", st),
			"ask the operator for a new token, then run: muster enrol join --force")
	}
	note := "nothing declared for this node yet"
	if st != nil && st.Pending {
		note += ": " + st.String()
	}
	if f == jsonFormat {
		return writeJSON(env.Stdio.Out, applyDocument(id.Node, res, false, note))
	}
	for _, n := range res.Notes {
		fmt.Fprintf(env.Stdio.Out, "note: %s\n", n)
	}
	fmt.Fprintf(env.Stdio.Out, "%s (newest generation %d)\n", note, newest)
	return nil
}

// applyJSONVersion is the version of apply --json's document, documented
// in muster-apply(1).
const applyJSONVersion = 1

// applyJSON is the document of apply --json.
type applyJSON struct {
	Version int    `json:"version"`
	Node    string `json:"node"`
	// Generation is the generation applied; null when nothing is
	// declared for this node yet.
	Generation *uint64 `json:"generation"`
	Newest     uint64  `json:"newest_generation"`
	DryRun     bool    `json:"dry_run"`
	// Outcome is computed from the lines: passed or failed; "" when
	// nothing was applied.
	Outcome string          `json:"outcome"`
	Counts  applyCountsJSON `json:"counts"`
	// Lines are every line of the report, ok ones included.
	Lines []outcome.Line `json:"lines"`
	Notes []string       `json:"notes"`
	// Sent: the report reached the spool; false in a dry run, and when
	// it waits in the outbox (exit status 4).
	Sent    bool `json:"sent"`
	Flushed int  `json:"flushed"` // earlier reports sent from the outbox
	Restart bool `json:"restart"` // exit status 7: a new muster runs next
}

type applyCountsJSON struct {
	Changed   int `json:"changed"`
	Removed   int `json:"removed"`
	Unchanged int `json:"unchanged"`
	Failed    int `json:"failed"`
}

// applyDocument is the document of apply --json for res; note, when
// given, says why nothing was applied.
func applyDocument(node string, res *apply.Result, dryRun bool, note string) applyJSON {
	doc := applyJSON{Version: applyJSONVersion, Node: node, Newest: res.Newest, DryRun: dryRun,
		Counts: applyCountsJSON{res.Changed, res.Removed, res.Unchanged, res.Failed},
		Sent:   res.Sent && !dryRun, Flushed: res.Flushed, Restart: res.Restart}
	doc.Notes = append(doc.Notes, res.Notes...)
	if note != "" {
		doc.Notes = append(doc.Notes, note)
	}
	if rep := res.Report; rep != nil {
		g := res.Generation
		doc.Generation = &g
		doc.Outcome = string(rep.Outcome())
		doc.Lines = rep.Lines
		doc.Notes = append(doc.Notes, rep.Notes...)
	}
	return doc
}

// interrupted says why a run was cut short, or "" if it was not.
func interrupted(ctx context.Context, timeout time.Duration) string {
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return fmt.Sprintf("apply did not finish within %s", timeout)
	case context.Canceled:
		return "apply was interrupted"
	}
	return ""
}

// printApply says what the run did, for people.
func printApply(w io.Writer, res *apply.Result, dryRun bool) {
	rep := res.Report
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	printLines(w, rep.Lines)
	switch {
	case dryRun && res.Changed == 0 && res.Removed == 0 && res.Failed == 0:
		fmt.Fprintf(w, "generation %d dry run: nothing would change, %s checked (nothing written)\n", res.Generation, plural(res.Unchanged, "resource"))
	case dryRun:
		fmt.Fprintf(w, "generation %d dry run: %d would change, %d would be removed, %d unchanged, %d failed (nothing written)\n", res.Generation, res.Changed, res.Removed, res.Unchanged, res.Failed)
	case res.Changed == 0 && res.Removed == 0 && res.Failed == 0:
		fmt.Fprintf(w, "generation %d applied: no change, %s verified\n", res.Generation, plural(res.Unchanged, "resource"))
	default:
		fmt.Fprintf(w, "generation %d applied: %d changed, %d removed, %d unchanged, %d failed\n", res.Generation, res.Changed, res.Removed, res.Unchanged, res.Failed)
	}
}

// applyStatus warns of what the run could not do and returns its exit
// status.
func applyStatus(env *Env, res *apply.Result, dryRun bool) error {
	rep := res.Report
	if !dryRun && !res.Sent && !res.Quiet {
		env.Warnf("report kept in the outbox, the next apply sends it: %v", res.SendError)
	}
	if rep.Outcome() == outcome.Failing {
		return quietly(fault.Failure)
	}
	if res.KnownGoodError != nil {
		env.Warnf("keeping this muster as the known-good one: %v", res.KnownGoodError)
	}
	if !dryRun && !res.Sent && !res.Quiet {
		// The work is done, but the mesh cannot see it yet.
		return quietly(fault.Temporary)
	}
	if res.Restart {
		return exitQuietly(ExitRestart)
	}
	return nil
}

// printLines shows every line that is not a plain verified "ok".
func printLines(w io.Writer, lines []outcome.Line) {
	for _, l := range lines {
		if l.Status == outcome.OK {
			continue
		}
		if l.Detail != "" {
			fmt.Fprintf(w, "%-8s %s: %s\n", l.Status, l.ID, l.Detail)
		} else {
			fmt.Fprintf(w, "%-8s %s\n", l.Status, l.ID)
		}
	}
}
