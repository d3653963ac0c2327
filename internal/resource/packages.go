package resource

import (
	"errors"
	"fmt"
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
		return it.candidate
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
		if it.err != nil || it.fatal != nil || it.spec.Version != "latest" {
			continue
		}
		c, err := r.s.Packages.Candidate(r.ctx, it.spec.Name)
		if err != nil {
			it.fatal = err
			continue
		}
		it.candidate = c
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
			it.fatal = errNoPackages
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
			it.fatal = fmt.Errorf("query installed packages: %w", err)
		}
		return
	}
	r.candidates(items)
	install := map[string]string{}
	var remove []string
	var installing, removing []*item
	for _, it := range items {
		if it.fatal != nil {
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
			it.what = []string{"removed " + v}
		default:
			want := wantVersion(it)
			install[it.spec.Name] = want
			installing = append(installing, it)
			switch {
			case !ok:
				it.what = []string{"installed " + orAny(want)}
				it.created = true
			default:
				it.what = []string{fmt.Sprintf("version %s → %s", v, want)}
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
				it.explain = err
			}
		}
	}
	if len(remove) > 0 {
		err := r.s.Packages.Remove(r.ctx, remove)
		for _, it := range removing {
			it.removed = true
			if err != nil {
				it.explain = err
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
		for _, it := range items {
			if it.fatal != nil {
				it.obs.err = it.fatal
			}
		}
	}
}

func packageDryPlan(it *item) ([]string, bool, error) {
	st := &it.obs.st
	switch want := wantVersion(it); {
	case it.absent:
		return []string{"remove " + st.Version}, true, nil
	case !st.Exists:
		return []string{"install " + orAny(want)}, false, nil
	default:
		return []string{fmt.Sprintf("version %s → %s", st.Version, want)}, false, nil
	}
}

// prunePackages removes orphaned packages in one Remove call, when asked.
func (r *run) prunePackages(items []*item) {
	if len(items) == 0 {
		return
	}
	if !r.s.Prune {
		for _, it := range items {
			it.leave = true
			it.note = pruneNote
		}
		return
	}
	r.changePackages(items)
	for _, it := range items {
		if !it.removed && it.fatal == nil {
			it.note = "already absent"
		}
	}
}
