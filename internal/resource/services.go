package resource

import (
	"errors"
	"fmt"
	"strings"
)

var errNoServices = errors.New("no service backend on this host")

const notManagedNote = "running is not managed under a root other than /; enablement verified"

// changeServices sets enablement, and running where units can run, from
// one look at all the units of the group. What starts must be what is
// declared: a unit file or drop-in this run changed (or a package, which
// may ship them) is followed by a reload of the init system before any
// unit is started, and so is a unit the init system runs an older
// definition of (its line says it was reloaded).
func (r *run) changeServices(items []*item) {
	svc := r.s.Services
	var todo []*item
	for _, it := range items {
		switch {
		case r.interrupted(it):
		case svc == nil:
			it.set().fatal = errNoServices
		default:
			todo = append(todo, it)
		}
	}
	if len(todo) == 0 {
		return
	}
	states, err := r.lookServices(todo)
	if err == nil && svc.CanRun() && anyStale(states) {
		if err = r.reload(); err == nil {
			for i, it := range todo {
				if states[i].Err == nil && states[i].Stale {
					it.changed = true
					it.set().what = append(it.set().what, "reloaded (systemd ran an older definition of the unit)")
				}
			}
			states, err = r.lookServices(todo)
		}
	}
	if err != nil {
		for _, it := range todo {
			it.set().fatal = err
		}
		return
	}
	for i, it := range todo {
		if states[i].Err != nil {
			it.set().fatal = states[i].Err
			continue
		}
		it.set().lookEnabled = &states[i].Enabled
		if r.interrupted(it) {
			continue
		}
		s := it.spec
		if s.Enabled != nil && states[i].Enabled != *s.Enabled {
			if err := svc.SetEnabled(r.ctx, s.Name, *s.Enabled); err != nil {
				it.set().fatal = err
				continue
			}
			it.changed = true
			it.set().what = append(it.set().what, pick(*s.Enabled, "enabled", "disabled"))
		}
		if s.Running != nil && svc.CanRun() && states[i].Active != *s.Running {
			if err := svc.SetRunning(r.ctx, s.Name, *s.Running); err != nil {
				it.set().fatal = err
				continue
			}
			r.seq++
			it.set().startSeq = r.seq
			it.changed = true
			it.set().what = append(it.set().what, pick(*s.Running, "started", "stopped"))
		}
	}
}

// lookServices reloads the init system if unit files changed since it
// last read them, then looks at the units of items in one query (see
// Services.Look).
func (r *run) lookServices(items []*item) ([]UnitState, error) {
	if err := r.reloadIfChanged(); err != nil {
		return nil, err
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.spec.Name
	}
	states, err := r.s.Services.Look(r.ctx, names)
	if err == nil && len(states) != len(names) {
		err = fmt.Errorf("the service backend read %d units of %d", len(states), len(names))
	}
	return states, err
}

// correctLooks enables or disables, after the read-back, the services
// whose look found them as declared while the read-back does not: the
// look took the init system's own record, which a link made or removed
// by hand leaves stale. Each is changed now and read back again, so
// that the drift is repaired in this run, not reported failed in every
// run until something reloads the init system.
func (r *run) correctLooks() {
	svc := r.s.Services
	var again []*item
	for _, it := range r.items {
		s := it.spec
		if s.Kind != Service || s.Enabled == nil || it.get().lookEnabled == nil || *it.get().lookEnabled != *s.Enabled ||
			it.err != nil || it.get().fatal != nil || it.obs.err != nil || it.obs.st.Enabled == nil || *it.obs.st.Enabled == *s.Enabled {
			continue
		}
		if r.interrupted(it) {
			continue
		}
		if err := svc.SetEnabled(r.ctx, s.Name, *s.Enabled); err != nil {
			it.set().fatal = err
			continue
		}
		it.changed = true
		it.set().what = append(it.set().what, pick(*s.Enabled, "enabled", "disabled")+" (found "+pick(*s.Enabled, "disabled", "enabled")+" by the read-back: a link changed by hand)")
		again = append(again, it)
	}
	if len(again) > 0 {
		r.observeServiceItems(again)
	}
}

func anyStale(states []UnitState) bool {
	for _, st := range states {
		if st.Err == nil && st.Stale {
			return true
		}
	}
	return false
}

// reloadIfChanged reloads the init system when a unit file or drop-in, or
// a package, changed in this run since it last read its unit files.
func (r *run) reloadIfChanged() error {
	svc := r.s.Services
	if !svc.CanRun() || r.reloadSeq >= r.seq {
		return nil
	}
	need := r.pkgSeq > r.reloadSeq
	for p, seq := range r.changed {
		if seq > r.reloadSeq && svc.UnitFile(p) {
			need = true
			break
		}
	}
	if !need {
		return nil
	}
	return r.reload()
}

func (r *run) reload() error {
	if err := r.s.Services.Reload(r.ctx); err != nil {
		return err
	}
	r.reloadSeq = r.seq
	return nil
}

// restarts restarts each service one of whose RestartOn paths changed in
// this run after the service was last started. A unit that is not running
// and not declared running is left stopped.
func (r *run) restarts() {
	for _, it := range r.items {
		s := it.spec
		if s.Kind != Service || it.err != nil || it.get().fatal != nil || len(s.RestartOn) == 0 {
			continue
		}
		var files, invalid []string
		for _, p := range s.RestartOn {
			if seq, ok := r.changed[p]; ok && seq > it.get().startSeq {
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
			it.set().note = joinNote(it.set().note, "not restarted: the new content of "+strings.Join(invalid, ", ")+" failed its validate command")
			continue
		}
		svc := r.s.Services
		if !svc.CanRun() {
			it.set().note = joinNote(it.set().note, "not restarted: units cannot be started here")
			continue
		}
		if s.Running == nil {
			states, err := r.lookServices([]*item{it})
			if err == nil {
				err = states[0].Err
			}
			if err != nil {
				it.set().fatal = err
				continue
			}
			if !states[0].Active {
				continue
			}
		}
		if r.interrupted(it) {
			continue
		}
		// A unit file changed by a later group than the service's.
		if err := r.reloadIfChanged(); err != nil {
			it.set().fatal = err
			continue
		}
		if err := svc.Restart(r.ctx, s.Name); err != nil {
			it.set().fatal = err
			continue
		}
		it.changed, it.restarted = true, true
		it.set().what = append(it.set().what, "restarted ("+strings.Join(files, ", ")+" changed)")
	}
}

// observeServices reads every service spec's enablement, and where units
// can run whether it is active and whether the init system runs its
// current definition, in one query for all of them.
func (r *run) observeServices() {
	svc := r.s.Services
	var todo []*item
	for _, it := range r.items {
		s := it.spec
		if s.Kind != Service || it.err != nil || it.leave {
			continue
		}
		it.obs = observed{}
		if svc == nil {
			it.obs.err = errNoServices
			continue
		}
		if s.Running != nil && !svc.CanRun() && !r.live && s.Enabled != nil {
			it.set().note = joinNote(it.set().note, notManagedNote)
		}
		todo = append(todo, it)
	}
	r.observeServiceItems(todo)
}

// observeServiceItems reads the units of todo, in one query, into their
// observations.
func (r *run) observeServiceItems(todo []*item) {
	svc := r.s.Services
	if len(todo) == 0 {
		return
	}
	names := make([]string, len(todo))
	for i, it := range todo {
		names[i] = it.spec.Name
	}
	states, err := svc.Units(r.ctx, names)
	if err == nil && len(states) != len(names) {
		err = fmt.Errorf("the service backend read %d units of %d", len(states), len(names))
	}
	for i, it := range todo {
		o := &it.obs
		switch {
		case err != nil:
			o.err = err
			continue
		case states[i].Err != nil:
			o.err = states[i].Err
			continue
		}
		st, s := states[i], it.spec
		o.st = State{Exists: true}
		if s.Enabled != nil {
			o.st.Enabled = &st.Enabled
		}
		if svc.CanRun() {
			if s.Running != nil || it.restarted {
				o.st.Active = &st.Active
			}
			o.st.Stale = st.Stale
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
	if st.Stale {
		d = append(d, "systemd runs an older definition of the unit than its files hold (NeedDaemonReload=yes): run systemctl daemon-reload")
	}
	return d
}

// serviceDryPlan lists what changeServices would do.
func serviceDryPlan(it *item, svc Services) []string {
	s, st := it.spec, &it.obs.st
	var what []string
	if st.Stale {
		what = append(what, "reload (systemd runs an older definition of the unit)")
	}
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
