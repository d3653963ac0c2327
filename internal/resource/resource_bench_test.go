package resource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/muster-tool/muster/internal/outcome"
)

// cpuTime reports the process's user+system CPU time per operation beside
// the wall time, which on a shared machine says more than the wall clock.
// Only time between start and stop counts.
type cpuClock struct {
	b     *testing.B
	t0    int64
	total int64
}

func cpuTime(b *testing.B) *cpuClock { c := &cpuClock{b: b}; c.start(); return c }
func (c *cpuClock) start()           { c.t0 = rusage(c.b) }
func (c *cpuClock) stop()            { c.total += rusage(c.b) - c.t0 }
func (c *cpuClock) report() {
	c.stop()
	c.b.ReportMetric(float64(c.total)/float64(c.b.N), "cpu-ns/op")
}

func rusage(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchSpecs declares n files of 200 bytes, 100 to a directory.
func benchSpecs(n int) []Spec {
	specs := make([]Spec, n)
	for i := range specs {
		content := fmt.Sprintf("%0200d", i)
		specs[i] = Spec{Kind: File, Path: fmt.Sprintf("/srv/bench/d%03d/f%05d.conf", i/100, i), Content: content, Mode: "0644", Owner: "0", Group: "0"}
	}
	return specs
}

func mustApply(b *testing.B, s *System, specs []Spec, want outcome.Status) {
	for i, r := range s.Apply(context.Background(), specs) {
		if r.Status != want && !(want == outcome.OK && r.Status == outcome.Changed) {
			b.Fatalf("%s: %s %s", specs[i].ID(), r.Status, r.Detail)
		}
	}
}

func benchNoop(b *testing.B, n int) {
	root := b.TempDir()
	specs := benchSpecs(n)
	s := &System{Root: root}
	mustApply(b, s, specs, outcome.Changed)
	b.ResetTimer()
	cpu := cpuTime(b)
	defer cpu.report()
	for b.Loop() {
		mustApply(b, s, specs, outcome.OK)
	}
}

func BenchmarkApplyNoop1000(b *testing.B)  { benchNoop(b, 1000) }
func BenchmarkApplyNoop10000(b *testing.B) { benchNoop(b, 10000) }

// BenchmarkFloorNoop1000 is the least any no-op check can do: lstat, read,
// sha256 and compare each file, on one goroutine. Apply's no-op is measured
// against it.
func BenchmarkFloorNoop1000(b *testing.B) {
	root := b.TempDir()
	specs := benchSpecs(1000)
	mustApply(b, &System{Root: root}, specs, outcome.Changed)
	b.ResetTimer()
	cpu := cpuTime(b)
	defer cpu.report()
	for b.Loop() {
		for _, sp := range specs {
			p := filepath.Join(root, sp.Path)
			if _, err := os.Lstat(p); err != nil {
				b.Fatal(err)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if !bytes.Equal(data, []byte(sp.Content)) || sum[0] == 0 && sum[1] == 0 && sum[2] == 0 {
				b.Fatal("differs")
			}
		}
	}
}

func BenchmarkApplyFirst1000(b *testing.B) {
	specs := benchSpecs(1000)
	parent := b.TempDir()
	i := 0
	cpu := cpuTime(b)
	defer cpu.report()
	for b.Loop() {
		b.StopTimer()
		cpu.stop()
		root := filepath.Join(parent, fmt.Sprint(i))
		i++
		if err := os.Mkdir(root, 0o755); err != nil {
			b.Fatal(err)
		}
		cpu.start()
		b.StartTimer()
		mustApply(b, &System{Root: root}, specs, outcome.Changed)
		b.StopTimer()
		cpu.stop()
		os.RemoveAll(root)
		cpu.start()
		b.StartTimer()
	}
}

func BenchmarkApplyDrift10of1000(b *testing.B) {
	root := b.TempDir()
	specs := benchSpecs(1000)
	s := &System{Root: root}
	mustApply(b, s, specs, outcome.Changed)
	cpu := cpuTime(b)
	defer cpu.report()
	for b.Loop() {
		b.StopTimer()
		cpu.stop()
		for j := 0; j < 1000; j += 100 {
			if err := os.WriteFile(filepath.Join(root, specs[j].Path), []byte("drifted"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		cpu.start()
		b.StartTimer()
		changed := 0
		for _, r := range s.Apply(context.Background(), specs) {
			switch r.Status {
			case outcome.Changed:
				changed++
			case outcome.OK:
			default:
				b.Fatalf("%s: %s %s", r.ID, r.Status, r.Detail)
			}
		}
		if changed != 10 {
			b.Fatalf("%d changed, want 10", changed)
		}
	}
}
