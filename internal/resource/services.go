package resource

import (
	"errors"
	"fmt"
	"strings"
)

var errNoServices = errors.New("no service backend on this host")

const notManagedNote = "running is not managed under a root other than /; enablement verified"

// changeServices sets enablement, and running where units can run.
func (r *run) changeServices(items []*item) {
	for _, it := range items {
		if r.interrupted(it) {
			continue
		}
		svc := r.s.Services
		if svc == nil {
			it.fatal = errNoServices
			continue
		}
		s := it.spec
		if s.Enabled != nil {
			en, err := svc.IsEnabled(r.ctx, s.Name)
			if err != nil {
				it.fatal = err
				continue
			}
			if en != *s.Enabled {
				if err := svc.SetEnabled(r.ctx, s.Name, *s.Enabled); err != nil {
					it.fatal = err
					continue
				}
				it.changed = true
				it.what = append(it.what, pick(*s.Enabled, "enabled", "disabled"))
			}
		}
		if s.Running != nil && svc.CanRun() {
			active, err := svc.IsActive(r.ctx, s.Name)
			if err != nil {
				it.fatal = err
				continue
			}
			if active != *s.Running {
				if err := svc.SetRunning(r.ctx, s.Name, *s.Running); err != nil {
					it.fatal = err
					continue
				}
				r.seq++
				it.startSeq = r.seq
				it.changed = true
				it.what = append(it.what, pick(*s.Running, "started", "stopped"))
			}
		}
	}
}

// restarts restarts each service one of whose RestartOn paths changed in
// this run after the service was last started. A unit that is not running
// and not declared running is left stopped.
func (r *run) restarts() {
	for _, it := range r.items {
		s := it.spec
		if s.Kind != Service || it.err != nil || it.fatal != nil || len(s.RestartOn) == 0 {
			continue
		}
		var files, invalid []string
		for _, p := range s.RestartOn {
			if seq, ok := r.changed[p]; ok && seq > it.startSeq {
				files = append(files, p)
			}
			if r.invalid[p] {
				invalid = append(invalid, p)
			}
		}
		if len(files) == 0 || (s.Running != nil && !*s.Running) {
			continue
		}
		if len(invalid) > 0 {
			// What changed goes with what was refused: restarting on
			// half of it would run a configuration no one declared.
			it.note = joinNote(it.note, "not restarted: the new content of "+strings.Join(invalid, ", ")+" failed its validate command")
			continue
		}
		svc := r.s.Services
		if !svc.CanRun() {
			it.note = joinNote(it.note, "not restarted: units cannot be started here")
			continue
		}
		if s.Running == nil {
			active, err := svc.IsActive(r.ctx, s.Name)
			if err != nil {
				it.fatal = err
				continue
			}
			if !active {
				continue
			}
		}
		if r.interrupted(it) {
			continue
		}
		if err := svc.Restart(r.ctx, s.Name); err != nil {
			it.fatal = err
			continue
		}
		it.changed, it.restarted = true, true
		it.what = append(it.what, "restarted ("+strings.Join(files, ", ")+" changed)")
	}
}

// observeServices reads each service spec's enablement, and whether it is
// active where units can run and running matters.
func (r *run) observeServices() {
	for _, it := range r.items {
		s := it.spec
		if s.Kind != Service || it.err != nil || it.leave {
			continue
		}
		o := &it.obs
		*o = observed{}
		svc := r.s.Services
		if svc == nil {
			o.err = errNoServices
			continue
		}
		o.st = State{Exists: true}
		if s.Running != nil && !svc.CanRun() && !r.live && s.Enabled != nil {
			it.note = joinNote(it.note, notManagedNote)
		}
		if s.Enabled != nil {
			en, err := svc.IsEnabled(r.ctx, s.Name)
			if err != nil {
				o.err = err
				continue
			}
			o.st.Enabled = &en
		}
		if (s.Running != nil || it.restarted) && svc.CanRun() {
			active, err := svc.IsActive(r.ctx, s.Name)
			if err != nil {
				o.err = err
				continue
			}
			o.st.Active = &active
		}
	}
}

func (r *run) serviceMismatch(it *item, st *State) []string {
	s := it.spec
	var d []string
	if s.Enabled != nil && (st.Enabled == nil || *st.Enabled != *s.Enabled) {
		d = append(d, fmt.Sprintf("%s, declared %s", pick(!*s.Enabled, "enabled", "disabled"), pick(*s.Enabled, "enabled", "disabled")))
	}
	canRun := r.s.Services != nil && r.s.Services.CanRun()
	switch {
	case s.Running != nil && canRun:
		if st.Active == nil || *st.Active != *s.Running {
			d = append(d, fmt.Sprintf("%s, declared %s", pick(!*s.Running, "running", "not running"), pick(*s.Running, "running", "not running")))
		}
	case s.Running != nil && r.live:
		d = append(d, "running is declared but units cannot be started here (is systemd running?)")
	case s.Running != nil && s.Enabled == nil:
		d = append(d, "nothing here can be verified: running is not managed under a root other than / and enabled is not declared")
	}
	if it.restarted && canRun && (st.Active == nil || !*st.Active) {
		d = append(d, "not running after restart")
	}
	return d
}

// serviceDryPlan lists what changeServices would do.
func serviceDryPlan(it *item, svc Services) []string {
	s, st := it.spec, &it.obs.st
	var what []string
	if s.Enabled != nil && st.Enabled != nil && *st.Enabled != *s.Enabled {
		what = append(what, pick(*s.Enabled, "enable", "disable"))
	}
	if s.Running != nil && svc.CanRun() && st.Active != nil && *st.Active != *s.Running {
		what = append(what, pick(*s.Running, "start", "stop"))
	}
	return what
}

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
