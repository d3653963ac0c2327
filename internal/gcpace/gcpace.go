// Package gcpace sets the pace of Go's garbage collector for the mesh's
// commands that read a fleet's worth of small bundles: report and enrol
// admit. Each bundle read leaves only a few facts behind, so most of what
// they allocate is garbage at once, and collecting it at the default pace
// costs much of the run (see the README's Performance section).
package gcpace

import (
	"os"
	"runtime/debug"
)

// Percent is the collector's GOGC while reading.
const Percent = 400

// Limit is the soft memory limit while reading: 1.75 GiB, which keeps
// report's first run over 1,000,000 reports from 100,000 nodes under
// 2 GiB. There the live heap is about 500 MiB while every report read
// leaves 64 KiB of garbage (age's buffer for the payload), so the limit,
// not Percent, paces the collector; at 1.5 GiB it collected a tenth more
// often, for 30 CPU-s more in the run. A limit below the live heap would
// make the collector run without pause.
const Limit = 1792 << 20

// ForReading sets Percent and Limit, unless GOGC or GOMEMLIMIT in the
// environment say otherwise, and returns a function that sets back what
// was before (for tests and benchmarks; a command keeps the pace).
func ForReading() (restore func()) {
	percent, limit := -2, int64(-1)
	if os.Getenv("GOGC") == "" {
		percent = debug.SetGCPercent(Percent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		limit = debug.SetMemoryLimit(Limit)
	}
	return func() {
		if percent != -2 {
			debug.SetGCPercent(percent)
		}
		if limit >= 0 {
			debug.SetMemoryLimit(limit)
		}
	}
}
