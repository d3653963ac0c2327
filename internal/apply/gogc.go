package apply

import (
	"os"
	"runtime/debug"
)

// An apply started by a timer is a short process whose heap is mostly the
// declaration, the observations and the report, all live until it ends: a
// garbage collection finds little to free, yet costs its marking and the
// pages its metadata touches. With Options.TuneGC (the apply command sets
// it; tests and other callers sharing a process do not) the collector runs
// at quietGCPercent while the declaration has at most
// quietGCResources resources, and at the process's own setting above that,
// where the heap is large enough for its multiple to matter. GOGC in the
// environment is always obeyed. The README's Performance section has what
// it saves.
const (
	quietGCPercent   = 400
	quietGCResources = 5000
)

// gcTuner switches the collector for one run and puts it back.
type gcTuner struct {
	on   bool
	prev int
}

func tuneGC(enabled bool) *gcTuner {
	t := &gcTuner{on: enabled && os.Getenv("GOGC") == ""}
	if t.on {
		t.prev = debug.SetGCPercent(quietGCPercent)
	}
	return t
}

// declared is told the declaration's size once it is known.
func (t *gcTuner) declared(resources int) {
	if t.on && resources > quietGCResources {
		debug.SetGCPercent(t.prev)
		t.on = false
	}
}

func (t *gcTuner) done() {
	if t.on {
		debug.SetGCPercent(t.prev)
		t.on = false
	}
}
