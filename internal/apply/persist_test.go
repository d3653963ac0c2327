package apply_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/outcome"
)

// A crash at any point of the end of a run, after the work is done, loses
// no report and leaves a state the next run goes on from: the mesh hears
// that motd changed (from the crashed run's report, or the next run's),
// the host ends on the new generation, and the run after that has nothing
// to say.
func TestCrashAtEveryPersistStepLosesNothing(t *testing.T) {
	for _, step := range apply.PersistSteps {
		t.Run(step, func(t *testing.T) {
			f := newFixture(t)
			h := f.enrol("web-1")
			f.declare(motd("one"))
			f.mustApply(h)
			gen := f.declare(motd("two"))

			undo := apply.CrashAfter(step)
			_, err := f.apply(h)
			undo()
			if !errors.Is(err, apply.ErrCrashed) {
				t.Fatalf("the run was not stopped after %s: %v", step, err)
			}
			if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "two\n" {
				t.Fatalf("motd %q: the work was not done before the crash", got)
			}

			res := f.mustApply(h)
			if res.Generation != gen {
				t.Fatalf("the run after the crash applied generation %d, want %d", res.Generation, gen)
			}
			heard := false
			for _, r := range f.reports(h) {
				if r.Generation != gen {
					continue
				}
				for _, l := range r.Lines {
					if l.ID == "file:/etc/motd" && l.Status == outcome.Changed {
						heard = true
					}
				}
			}
			if !heard {
				t.Errorf("after a crash at %s, no report in the spool says motd changed", step)
			}
			if n := len(outbox(t, h)); n != 0 {
				t.Errorf("after a crash at %s, %d reports still wait in the outbox", step, n)
			}
			if !strings.Contains(readFile(t, filepath.Join(h.state, "state.toml")), "generation = "+strconv.FormatUint(gen, 10)+"\n") {
				t.Errorf("after a crash at %s, the state is not on generation %d", step, gen)
			}
			if res := f.mustApply(h); res.Changed+res.Removed+res.Failed != 0 {
				t.Errorf("the second run after a crash at %s: %+v", step, res.Counts)
			}
		})
	}
}
