package gcpace

import (
	"runtime/debug"
	"testing"
)

func percent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func limit() int64 { return debug.SetMemoryLimit(-1) }

func TestForReading(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	p0, l0 := percent(), limit()
	restore := ForReading()
	if p, l := percent(), limit(); p != Percent || l != Limit {
		t.Errorf("reading at GOGC %d and a limit of %d, want %d and %d", p, l, Percent, Limit)
	}
	restore()
	if p, l := percent(), limit(); p != p0 || l != l0 {
		t.Errorf("restored to GOGC %d and a limit of %d, want %d and %d", p, l, p0, l0)
	}
}

// The environment's GOGC and GOMEMLIMIT win.
func TestForReadingLeavesTheEnvironmentsPace(t *testing.T) {
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	p0, l0 := percent(), limit()
	defer ForReading()()
	if p, l := percent(), limit(); p != p0 || l != l0 {
		t.Errorf("with GOGC and GOMEMLIMIT set, reading at GOGC %d and a limit of %d, want %d and %d as they were", p, l, p0, l0)
	}
}
