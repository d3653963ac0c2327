package apply

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func numGC() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

func TestTuneGC(t *testing.T) {
	t.Setenv("GOGC", "")
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	percent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	g := tuneGC(true)
	if p := percent(); p != quietGCPercent {
		t.Fatalf("during a run: GOGC %d, want %d", p, quietGCPercent)
	}
	g.declared(quietGCResources)
	if p := percent(); p != quietGCPercent {
		t.Fatalf("small declaration: GOGC %d, want %d", p, quietGCPercent)
	}
	g.done()
	if p := percent(); p != 100 {
		t.Fatalf("after the run: GOGC %d, want 100 back", p)
	}

	g = tuneGC(true)
	g.declared(quietGCResources + 1)
	if p := percent(); p != largeGCPercent {
		t.Fatalf("large declaration: GOGC %d, want %d", p, largeGCPercent)
	}
	n := numGC()
	g.released()
	if numGC() == n {
		t.Error("a large declaration's run let go of its state and nothing was collected")
	}
	g.done()
	if p := percent(); p != 100 {
		t.Fatalf("after the run: GOGC %d, want 100 back", p)
	}

	g = tuneGC(true)
	g.declared(quietGCResources)
	n = numGC()
	if g.released(); numGC() != n {
		t.Error("a small declaration's run collected when it let go of its state")
	}
	g.done()

	if tuneGC(false); percent() != 100 {
		t.Fatal("a caller that did not ask had its collector changed")
	}
	t.Setenv("GOGC", "50")
	if tuneGC(true); percent() != 100 {
		t.Fatal("GOGC in the environment was overridden")
	}
}
