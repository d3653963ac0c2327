// Package upgrade owns how muster replaces itself on a host by the same
// path as everything else: a package resource names the muster version,
// and apply installs it like any package. What this package adds is what
// keeps a host from being stranded by its own upgrade: the newly installed
// binary runs once (its self-check) before the old one exits for the
// restart, and a version that fails it is taken back at once and not
// retried; the last known-good binary is kept, so the launcher the timer
// runs (dist/muster-launch) can restore it when a version that passed its
// check still fails to start; and the apply after such a rollback
// reinstalls the known-good version through apt and reports what happened.
// muster-upgrade(7) describes the whole path and its limits.
package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
)

const (
	// PackageName is the Debian package muster is delivered as.
	PackageName = "muster"
	// BinaryPath is where the package puts muster, below the root.
	BinaryPath = "usr/bin/muster"
	// DefaultCheckTimeout bounds the self-check.
	DefaultCheckTimeout = 60 * time.Second
	// RollbackLineID is the report line of a rollback the launcher did
	// since the last apply.
	RollbackLineID = "muster:rollback"
)

// Options say where one apply acts.
type Options struct {
	// Root is "/" or the scratch root apply acts in.
	Root string
	// State is the host's state directory.
	State string
	// Config is the host config file and Spool the spool location the
	// apply uses ("" for the config's); the self-check is given both.
	Config string
	Spool  string
	// Packages is the package backend of the apply.
	Packages resource.Packages
	// CheckTimeout bounds the self-check (DefaultCheckTimeout if zero).
	CheckTimeout time.Duration
	DryRun       bool
	Now          func() time.Time
}

// Upgrade guards muster's own package during one apply. Use one per
// apply: New, then Apply in place of resource.System.Apply, then read
// Notes, Lines, Failed and Restart into the report and the state, and
// call Saved once the state file is written.
type Upgrade struct {
	o       Options
	failed  Failed
	notes   []string
	lines   []outcome.Line
	restart bool
	// consume: the launcher's rollback note has been acted on and goes
	// once the state holding the failed version is saved.
	consume bool
}

// New starts the guard for one apply; failed is the host state's list of
// versions that failed here.
func New(o Options, failed Failed) *Upgrade {
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Root == "" {
		o.Root = "/"
	}
	return &Upgrade{o: o, failed: append(Failed(nil), failed...)}
}

// Notes are the report's notes about muster's own version.
func (u *Upgrade) Notes() []string { return u.notes }

// Lines are report lines no declared resource stands for: a rollback the
// launcher did (RollbackLineID).
func (u *Upgrade) Lines() []outcome.Line { return u.lines }

// Failed is the list of failed versions for the state file, with what
// this apply learned.
func (u *Upgrade) Failed() Failed { return u.failed }

// Restart reports that this apply installed a new muster that passed its
// self-check: the running one is outdated and should exit with the
// restart status once its report is written.
func (u *Upgrade) Restart() bool { return u.restart }

// Saved is called once the state file holding Failed is written; only
// then is the launcher's rollback note removed, so a crash in between
// reports it again instead of forgetting the failed version.
func (u *Upgrade) Saved() error {
	if !u.consume {
		return nil
	}
	err := os.Remove(filepath.Join(u.o.State, RollbackNote))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	u.consume = false
	return nil
}

// isMuster reports whether a spec is muster's own package.
func isMuster(s resource.Spec) bool {
	return s.Kind == resource.Package && (s.Name == PackageName || strings.HasPrefix(s.Name, PackageName+":"))
}

// Apply is sys.Apply(ctx, specs) with muster's own package guarded, and
// returns one result per spec, in order, as sys.Apply does:
//
//   - first, a rollback the launcher did since the last apply is acted
//     on: the failed version is remembered, the restored version is
//     reinstalled through apt (so dpkg agrees with the binary), and a
//     failed line RollbackLineID says what happened;
//   - a declared muster version that failed here before is not installed:
//     its line fails and says when and why;
//   - when the apply changed the installed muster version, the new binary
//     runs its self-check; if it fails, the line fails with the reason,
//     the previous version is reinstalled at once and the failed version
//     is remembered; if it passes, Restart reports it.
func (u *Upgrade) Apply(ctx context.Context, sys *resource.System, specs []resource.Spec) []resource.Result {
	u.rollback(ctx)
	i := -1
	for j, s := range specs {
		if isMuster(s) {
			i = j
		}
	}
	if i < 0 || specs[i].Version == "absent" || u.o.Packages == nil {
		return sys.Apply(ctx, specs)
	}
	spec := specs[i]
	before, err := u.installed(ctx)
	if err != nil {
		// The package line fails with the same query error.
		return sys.Apply(ctx, specs)
	}
	if x, ok := u.failed.Find(u.target(ctx, spec, before)); ok {
		rest := append(append([]resource.Spec(nil), specs[:i]...), specs[i+1:]...)
		results := sys.Apply(ctx, rest)
		held := resource.Result{ID: spec.ID(), Status: outcome.Failed, Detail: x.held()}
		return append(results[:i], append([]resource.Result{held}, results[i:]...)...)
	}
	results := sys.Apply(ctx, specs)
	if sys.DryRun {
		return results
	}
	after, err := u.installed(ctx)
	if err != nil || after == before || after == "" {
		return results
	}
	results[i] = u.check(ctx, results[i], before, after)
	return results
}

// installed returns the installed muster version, "" when none is.
func (u *Upgrade) installed(ctx context.Context) (string, error) {
	got, err := u.o.Packages.Installed(ctx, []string{PackageName})
	if err != nil {
		return "", err
	}
	return got[PackageName], nil
}

// target is the version applying spec would leave installed: the
// declared one, the candidate for "latest", and for "present" the
// installed one or else the candidate. "" when it cannot be told; the
// package line then says why.
func (u *Upgrade) target(ctx context.Context, spec resource.Spec, before string) string {
	switch spec.Version {
	case "", "present":
		if before != "" {
			return before
		}
	case "latest":
	default:
		return spec.Version
	}
	c, err := u.o.Packages.Candidate(ctx, PackageName)
	if err != nil {
		return ""
	}
	return c
}

// check runs the self-check of the newly installed version and, when it
// fails, puts the previous version back.
func (u *Upgrade) check(ctx context.Context, line resource.Result, before, after string) resource.Result {
	bin := filepath.Join(u.o.Root, BinaryPath)
	err := RunCheck(ctx, bin, CheckArgs(u.o.Config, u.o.State, u.o.Spool), u.o.CheckTimeout)
	if err == nil {
		u.restart = true
		u.notes = append(u.notes, fmt.Sprintf("muster %s installed and passed its self-check; it runs from the next apply", after))
		return line
	}
	detail := err.Error()
	var ce *CheckError
	if errors.As(err, &ce) {
		detail = ce.What
		if ce.Said != "" {
			detail += ": " + ce.Said
		}
	}
	u.failed = u.failed.With(Failure{Version: after, At: u.o.Now().UTC(), Reason: FailedCheck, Detail: detail})
	back := u.putBack(ctx, before, after)
	u.notes = append(u.notes, fmt.Sprintf("muster %s failed its self-check (%s); %s", after, detail, back))
	line.Status = outcome.Failed
	line.Digest = ""
	line.Detail = fmt.Sprintf("muster %s was installed but %v; %s", after, err, back)
	return line
}

// putBack reinstalls version before after failed failed its check, and
// says what it did.
func (u *Upgrade) putBack(ctx context.Context, before, failed string) string {
	var why string
	if before != "" {
		err := u.o.Packages.Install(ctx, map[string]string{PackageName: before})
		if err == nil {
			var now string
			now, err = u.installed(ctx)
			if err == nil && now != before {
				err = fmt.Errorf("dpkg lists %s after the reinstall", orNone(now))
			}
		}
		if err == nil {
			return "reinstalled muster " + before
		}
		why = fmt.Sprintf("reinstalling muster %s failed: %v", before, err)
	} else {
		why = "no earlier muster package to reinstall"
	}
	if v, err := restoreKnownGood(u.o.State, u.o.Root); err == nil {
		return fmt.Sprintf("%s; restored the known-good muster binary %s (dpkg lists %s until an apply installs a good version)", why, v, failed)
	}
	return why + "; no known-good muster binary to restore"
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// rollback acts on the launcher's note, if there is one.
func (u *Upgrade) rollback(ctx context.Context) {
	note := filepath.Join(u.o.State, RollbackNote)
	r, err := readRollback(u.o.State)
	if err != nil {
		detail := err.Error()
		if !u.o.DryRun {
			if rerr := os.Rename(note, note+".bad"); rerr == nil {
				detail += "; moved aside to " + RollbackNote + ".bad"
			}
		}
		u.lines = append(u.lines, outcome.Line{ID: RollbackLineID, Status: outcome.Failed, Detail: detail})
		return
	}
	if r == nil {
		return
	}
	at := r.at()
	if at.IsZero() {
		at = u.o.Now().UTC()
	}
	u.failed = u.failed.With(Failure{Version: r.FailedVersion, At: at, Reason: FailedStart,
		Detail: fmt.Sprintf("%d failed starts in a row: %s; rolled back to %s", r.Failures, r.Reason, r.RestoredVersion)})
	summary := r.summary()
	if u.o.DryRun || u.o.Packages == nil {
		u.notes = append(u.notes, summary)
		u.lines = append(u.lines, outcome.Line{ID: RollbackLineID, Status: outcome.Failed, Detail: summary})
		return
	}
	// The restored binary runs, but dpkg still lists the failed version:
	// reinstalling the restored one makes the two agree.
	have, err := u.installed(ctx)
	if err == nil && have != r.RestoredVersion {
		if err = u.o.Packages.Install(ctx, map[string]string{PackageName: r.RestoredVersion}); err == nil {
			if have, err = u.installed(ctx); err == nil && have != r.RestoredVersion {
				err = fmt.Errorf("dpkg lists %s after the reinstall", orNone(have))
			}
		}
	}
	if err != nil {
		msg := fmt.Sprintf("%s; reinstalling muster %s through apt failed (the next apply tries again): %v", summary, r.RestoredVersion, err)
		u.notes = append(u.notes, msg)
		u.lines = append(u.lines, outcome.Line{ID: RollbackLineID, Status: outcome.Failed, Detail: msg})
		return
	}
	u.notes = append(u.notes, fmt.Sprintf("%s; muster %s reinstalled through apt", summary, r.RestoredVersion))
	u.lines = append(u.lines, outcome.Line{ID: RollbackLineID, Status: outcome.Failed, Detail: summary})
	u.consume = true
}
