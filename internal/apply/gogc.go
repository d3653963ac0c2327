package apply

import (
	"os"
	"runtime"
	"runtime/debug"
)

// An apply started by a timer is a short process whose heap is mostly the
// declaration, the observations and the report, all live until it ends: a
// garbage collection finds little to free, yet costs its marking and the
// pages its metadata touches. With Options.TuneGC (the apply command sets
// it; tests and other callers sharing a process do not) the collector runs
// at quietGCPercent while the declaration has at most quietGCResources
// resources. Above that the heap is large enough for its multiple to be
// the peak memory that matters, and the collector runs at largeGCPercent:
// what a collection costs is the live heap marked once per that fraction
// of it allocated, so a tight pace costs the same fraction more CPU
// whatever the size (measured at 100,000 files: about a tenth more, for a
// peak about a fifth lower; see the README's Performance section). When
// the run lets go of its state of each resource (released), a large one
// collects at once, so that what the rest of the run allocates takes that
// memory back rather than growing the heap. GOGC in the environment is
// always obeyed.
const (
	quietGCPercent   = 400
	quietGCResources = 5000
	largeGCPercent   = 10
)

// gcTuner switches the collector for one run and puts it back.
type gcTuner struct {
	on    bool
	large bool
	prev  int
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
		debug.SetGCPercent(largeGCPercent)
		t.large = true
	}
}

// released is told that the run let go of its state of each resource.
func (t *gcTuner) released() {
	if t.on && t.large {
		runtime.GC()
	}
}

func (t *gcTuner) done() {
	if t.on {
		debug.SetGCPercent(t.prev)
		t.on, t.large = false, false
	}
}
