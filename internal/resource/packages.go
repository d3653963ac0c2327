package resource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/muster-tool/muster/internal/outcome"
)

var errNoPackages = errors.New("no package backend on this host")

const pruneNote = "left installed: removing orphaned packages was not asked for"

// wantVersion is what a package spec asks for: "" for any installed
// version, "absent", or an exact version ("latest" resolved by Candidate).
func wantVersion(it *item) string {
	switch v := it.spec.Version; v {
	case "", "present":
		return ""
	case "latest":
		return it.get().candidate
	default:
		return v
	}
}

func packageMismatch(it *item, st *State) []string {
	switch {
	case it.absent && st.Exists:
		return []string{fmt.Sprintf("installed (%s), declared absent", st.Version)}
	case it.absent:
		return nil
	case !st.Exists:
		return []string{"not installed"}
	}
	want := wantVersion(it)
	if want != "" && st.Version != want {
		what := "declared"
		if it.spec.Version == "latest" {
			what = "candidate"
		}
		return []string{fmt.Sprintf("version %s ≠ %s %s", st.Version, what, want)}
	}
	return nil
}

// candidates resolves "latest" for each item that asks for it.
func (r *run) candidates(items []*item) {
	for _, it := range items {
		if it.err != nil || it.get().fatal != nil || it.spec.Version != "latest" {
			continue
		}
		c, err := r.s.Packages.Candidate(r.ctx, it.spec.Name)
		if err != nil {
			it.set().fatal = err
			continue
		}
		it.set().candidate = c
	}
}

// changePackages reconciles one group's packages with one Installed query,
// then at most one Install and one Remove call for all of them.
func (r *run) changePackages(items []*item) {
	if len(items) == 0 {
		return
	}
	if r.s.Packages == nil {
		for _, it := range items {
			it.set().fatal = errNoPackages
		}
		return
	}
	if r.ctx.Err() != nil {
		for _, it := range items {
			r.interrupted(it)
		}
		return
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.spec.Name
	}
	installed, err := r.s.Packages.Installed(r.ctx, names)
	if err != nil {
		for _, it := range items {
			it.set().fatal = fmt.Errorf("query installed packages: %w", err)
		}
		return
	}
	r.candidates(items)
	install := map[string]string{}
	var remove []string
	var installing, removing []*item
	for _, it := range items {
		if it.get().fatal != nil {
			continue
		}
		v, ok := installed[it.spec.Name]
		st := State{Exists: ok, Version: v}
		if len(packageMismatch(it, &st)) == 0 {
			continue
		}
		r.seq++
		it.seq = r.seq
		r.pkgSeq = r.seq
		switch {
		case it.absent:
			remove = append(remove, it.spec.Name)
			removing = append(removing, it)
			it.set().what = []string{"removed " + v}
		default:
			want := wantVersion(it)
			install[it.spec.Name] = want
			installing = append(installing, it)
			switch {
			case !ok:
				it.set().what = []string{"installed " + orAny(want)}
				it.created = true
			default:
				it.set().what = []string{fmt.Sprintf("version %s → %s", v, want)}
			}
		}
	}
	// A shared call's error explains every line that did not reach its
	// state; lines that did are still verified by the read-back.
	if len(install) > 0 {
		err := r.s.Packages.Install(r.ctx, install)
		for _, it := range installing {
			it.changed = true
			if err != nil {
				it.set().explain = err
			}
		}
	}
	if len(remove) > 0 {
		err := r.s.Packages.Remove(r.ctx, remove)
		for _, it := range removing {
			it.removed = true
			if err != nil {
				it.set().explain = err
			}
		}
	}
}

func orAny(v string) string {
	if v == "" {
		return "(repository's version)"
	}
	return v
}

// observePackages reads every package spec's state with one Installed
// query.
func (r *run) observePackages() {
	var items []*item
	var names []string
	for _, it := range r.items {
		if it.spec.Kind == Package && it.err == nil && !it.leave {
			items = append(items, it)
			names = append(names, it.spec.Name)
		}
	}
	if len(items) == 0 {
		return
	}
	if r.s.Packages == nil {
		for _, it := range items {
			it.obs = observed{err: errNoPackages}
		}
		return
	}
	installed, err := r.s.Packages.Installed(r.ctx, names)
	for _, it := range items {
		o := &it.obs
		*o = observed{}
		if err != nil {
			o.err = fmt.Errorf("query installed packages: %w", err)
			continue
		}
		v, ok := installed[it.spec.Name]
		o.st = State{Exists: ok, Version: v}
	}
	if r.s.DryRun {
		r.candidates(items)
		// A dry run names the version an install would pick; a package
		// no repository offers would fail the install, and fails here.
		for _, it := range items {
			if it.get().fatal == nil && it.obs.err == nil && !it.absent && !it.obs.st.Exists && wantVersion(it) == "" {
				x := it.set()
				x.candidate, x.fatal = r.s.Packages.Candidate(r.ctx, it.spec.Name)
			}
			if it.get().fatal != nil {
				it.obs.err = it.get().fatal
			}
		}
	}
}

// installVersion is the version a dry run says the package would be
// installed at: the declared one, else the candidate.
func installVersion(it *item) string {
	if v := wantVersion(it); v != "" {
		return v
	}
	return it.get().candidate
}

// packageDryPlan says what changePackages would do, naming the package
// and the versions: install, upgrade or downgrade (when the backend can
// order versions), remove.
func (r *run) packageDryPlan(it *item) ([]string, bool, error) {
	st, name := &it.obs.st, it.spec.Name
	switch want := installVersion(it); {
	case it.absent:
		return []string{fmt.Sprintf("remove %s %s", name, st.Version)}, true, nil
	case !st.Exists:
		return []string{fmt.Sprintf("install %s %s", name, orAny(want))}, false, nil
	default:
		if vo, ok := r.s.Packages.(VersionOrder); ok {
			if c, err := vo.CompareVersions(r.ctx, st.Version, want); err == nil && c != 0 {
				return []string{fmt.Sprintf("%s %s %s → %s", pick(c < 0, "upgrade", "downgrade"), name, st.Version, want)}, false, nil
			}
		}
		return []string{fmt.Sprintf("version %s → %s", st.Version, want)}, false, nil
	}
}

// unitDirs are where packages put systemd unit files.
var unitDirs = []string{"/lib/systemd/system/", "/usr/lib/systemd/system/", "/etc/systemd/system/"}

// unitFromPackage says, in a dry run, which package this run would install
// that brings the unit file of service it: a unit that does not exist yet
// because its package is not installed yet is what the run would do, not
// a failure. sure is false when a package's files could not be read (only
// a download could tell); found is false when no package this run
// installs is known to bring it, or might.
func (r *run) unitFromPackage(it *item) (pkg string, sure, found bool) {
	pf, ok := r.s.Packages.(PackageFiles)
	if !ok {
		return "", false, false
	}
	unit := UnitName(it.spec.Name)
	var maybe []string
	for _, p := range r.items {
		if p.spec.Kind != Package || p.err != nil || p.obs.err != nil || p.absent || len(packageMismatch(p, &p.obs.st)) == 0 {
			continue
		}
		v := installVersion(p)
		named := p.spec.Name + " " + orAny(v)
		paths, ok, err := pf.Files(r.ctx, p.spec.Name, v)
		switch {
		case err != nil:
			continue
		case !ok:
			// Only a package new to the host is taken to bring a unit
			// that is not there: an upgrade rarely adds one.
			if !p.obs.st.Exists {
				maybe = append(maybe, named)
			}
			continue
		}
		for _, f := range paths {
			for _, d := range unitDirs {
				if f == d+unit {
					return named, true, true
				}
			}
		}
	}
	if len(maybe) > 0 {
		return strings.Join(maybe, " or "), false, true
	}
	return "", false, false
}

// serviceFromPackageResult is a dry run's line for a service whose unit
// a package of the same run brings (unitFromPackage): what the run would
// do once the package installed it.
func (r *run) serviceFromPackageResult(it *item, pkg string, sure bool) Result {
	s, svc := it.spec, r.s.Services
	unit := UnitName(s.Name)
	var verbs []string
	if s.Enabled != nil {
		verbs = append(verbs, pick(*s.Enabled, "enable", "disable"))
	}
	if s.Running != nil && svc != nil && svc.CanRun() {
		verbs = append(verbs, pick(*s.Running, "start", "stop"))
	}
	if len(verbs) == 0 {
		verbs = []string{"read back"}
	}
	d := "would " + strings.Join(verbs, " and ") + " " + unit
	if sure {
		d += fmt.Sprintf(" (its unit comes with package %s, which this run installs)", pkg)
	} else {
		d += fmt.Sprintf(" if package %s, which this run installs, brings its unit (what a package holds cannot be told here without downloading it; the unit is not there now)", pkg)
	}
	if s.Running != nil && (svc == nil || !svc.CanRun()) && !r.live && s.Enabled != nil {
		d += "; " + notManagedNote
	}
	return Result{ID: s.ID(), Status: outcome.Changed, Detail: d}
}

// prunePackages removes orphaned packages in one Remove call, when asked.
func (r *run) prunePackages(items []*item) {
	if len(items) == 0 {
		return
	}
	if !r.s.Prune {
		for _, it := range items {
			it.leave = true
			it.set().note = pruneNote
		}
		return
	}
	r.changePackages(items)
	for _, it := range items {
		if !it.removed && it.get().fatal == nil {
			it.set().note = "already absent"
		}
	}
}
