package enrol

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/gcpace"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/testutil/simfleet"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// unsyncedDir is a directory spool whose Put skips fsync, for building a
// large spool before a benchmark: what is measured runs on the real
// spool.Dir over the same files.
type unsyncedDir struct{ *spool.Dir }

func (d unsyncedDir) Put(_ context.Context, name string, data []byte) error {
	p := filepath.Join(d.Path(), filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o444)
}

// pendingJoins issues n tokens and writes one join request for each, as
// n hosts would.
func pendingJoins(b testing.TB, f *fixture, n int) {
	b.Helper()
	real := f.m.Spool
	f.m.Spool = unsyncedDir{real.(*spool.Dir)}
	defer func() { f.m.Spool = real }()
	reg := f.registry()
	err := workpool.Run(f.ctx, n, runtime.GOMAXPROCS(0), func(i int) error {
		name := fmt.Sprintf("node-%05d", i)
		tok, err := Issue(f.ctx, f.m, reg, IssueOptions{Name: name, Expires: DefaultExpiry, Now: t0})
		if err != nil {
			return err
		}
		data, fp := joinRequest(b, f.m, tok.ID(), name, tok, t0)
		return f.m.Spool.Put(f.ctx, spool.JoinName(tok.ID(), fp), data)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAdmit10k admits 10,000 pending join requests, each with its own
// token. The target is 10 seconds on a 2-core machine.
func BenchmarkAdmit10k(b *testing.B) { benchmarkAdmit(b, 10000) }

// BenchmarkAdmit1k is the same with 1,000, for a quick look.
func BenchmarkAdmit1k(b *testing.B) { benchmarkAdmit(b, 1000) }

// BenchmarkAdmitFleet admits 100,000 pending join requests, each with its
// own token, from a fleet made once and kept (see internal/testutil/
// simfleet): every run admits on a copy of it. The target is 60 seconds
// on a 2-core machine.
//
//	MUSTER_BENCH_FLEET=1 go test -run '^$' -bench AdmitFleet -benchtime 1x -timeout 2h ./internal/enrol
func BenchmarkAdmitFleet(b *testing.B) {
	simfleet.Enabled(b)
	const n = 100_000
	cached := simfleet.Cache(b, "joins", fmt.Sprintf("%d-v2", n), func(dir string) error {
		pendingJoins(b, newFixtureIn(b, dir), n)
		return nil
	})
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		simfleet.Copy(b, filepath.Join(cached, "mesh"), filepath.Join(dir, "mesh"))
		simfleet.Link(b, filepath.Join(cached, "spool"), filepath.Join(dir, "spool"))
		m, err := mesh.Open(context.Background(), filepath.Join(dir, "mesh"), filepath.Join(dir, "spool"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		admitOnce(b, &fixture{t: b, ctx: context.Background(), dir: dir, m: m}, n)
	}
}

func benchmarkAdmit(b *testing.B, n int) {
	for b.Loop() {
		b.StopTimer()
		f := newFixture(b)
		pendingJoins(b, f, n)
		b.StartTimer()
		admitOnce(b, f, n)
	}
}

// admitOnce admits the n join requests pending in f's spool, reporting
// its wall and CPU time.
func admitOnce(b *testing.B, f *fixture, n int) {
	// With the collector at the pace enrol admit sets.
	defer gcpace.ForReading()()
	start, cpu, sys := time.Now(), cpuTime(), sysTime()
	res, reg, err := Admit(f.ctx, f.m, t0.Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	// Wall time depends on what else the machine is doing; the CPU time
	// says how much work admitting was.
	b.ReportMetric(time.Since(start).Seconds(), "s/admit")
	b.ReportMetric((cpuTime() - cpu).Seconds(), "cpu-s/admit")
	b.ReportMetric((sysTime() - sys).Seconds(), "sys-s/admit")
	b.StopTimer()
	if len(res.Admitted) != n || len(res.Refused) != 0 || len(reg.Active()) != n {
		b.Fatalf("admitted %d, refused %d, active %d; want %d, 0, %d", len(res.Admitted), len(res.Refused), len(reg.Active()), n, n)
	}
	b.StartTimer()
}
