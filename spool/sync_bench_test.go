package spool_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/testutil/simfleet"
	"github.com/muster-tool/muster/spool"
)

// writeObjects lays out objects straight as files, as a directory spool
// holds them, without the fsyncs of Put: setting up a large spool for a
// benchmark should not take minutes. data gives each object's bytes.
func writeObjects(b *testing.B, dir string, names []string, data func(i int, name string) []byte) {
	b.Helper()
	made := map[string]bool{}
	for i, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if d := filepath.Dir(p); !made[d] {
			if err := os.MkdirAll(d, 0o777); err != nil {
				b.Fatal(err)
			}
			made[d] = true
		}
		if err := os.WriteFile(p, data(i, n), 0o444); err != nil {
			b.Fatal(err)
		}
	}
}

// reportNames names n reports spread over nodes, as a busy spool holds
// them.
func reportNames(n, nodes int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = spool.ReportName(fmt.Sprintf("node%04d", i%nodes), uint64(i/nodes), 1)
	}
	return names
}

// BenchmarkSyncNothingNew syncs two copies of a 100,000-object spool that
// already agree: both sides are listed and matched by name and size, no
// object is read. The target is 3s.
func BenchmarkSyncNothingNew(b *testing.B) {
	names := reportNames(100_000, 1000)
	src, dst := b.TempDir(), b.TempDir()
	small := func(i int, _ string) []byte { return fmt.Appendf(nil, "object %d", i) }
	writeObjects(b, src, names, small)
	writeObjects(b, dst, names, small)
	s, _ := spool.OpenDir(src)
	d, _ := spool.OpenDir(dst)
	b.ResetTimer()
	user, sys := cpuTimes()
	for range b.N {
		res, err := spool.Sync(b.Context(), s, d, checked)
		if err != nil || res.Copied != 0 || res.Skipped != len(names) {
			b.Fatalf("Sync = %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N), "s/sync")
	user2, sys2 := cpuTimes()
	b.ReportMetric((user2+sys2-user-sys).Seconds()/float64(b.N), "cpu-s/sync")
}

// BenchmarkSyncFleet syncs two copies of the spool of a 100,000-node mesh
// that already agree: 1,000,000 objects, of which 100,000 nodes' token,
// join request and admission (compared by content, see AlwaysCompared)
// and briefing, and six reports a node. The copies are made once and
// kept (see internal/testutil/simfleet); the target is 10 s.
//
//	MUSTER_BENCH_FLEET=1 go test -run '^$' -bench SyncFleet -benchtime 1x -timeout 3h ./spool
func BenchmarkSyncFleet(b *testing.B) {
	simfleet.Enabled(b)
	const nodes, reports = 100_000, 6
	var names []string
	for i := range nodes {
		tok, fp := fmt.Sprintf("%032x", i), fmt.Sprintf("%032x", nodes+i)
		names = append(names, spool.TokenName(tok), spool.JoinName(tok, fp), spool.AdmitName(tok), spool.BriefName(fp, 1))
		for g := range reports {
			names = append(names, spool.ReportName(fp, uint64(g+1), 1))
		}
	}
	body := func(i int, n string) []byte { return fmt.Appendf(nil, "%0300d", i) }
	cached := simfleet.Cache(b, "sync", fmt.Sprintf("%d-v1", len(names)), func(dir string) error {
		writeObjects(b, filepath.Join(dir, "src"), names, body)
		simfleet.Link(b, filepath.Join(dir, "src"), filepath.Join(dir, "dst"))
		return nil
	})
	s, _ := spool.OpenDir(filepath.Join(cached, "src"))
	d, _ := spool.OpenDir(filepath.Join(cached, "dst"))
	user, sys := cpuTimes()
	for b.Loop() {
		res, err := spool.Sync(b.Context(), s, d, spool.SyncOptions{})
		if err != nil || res.Copied != 0 || res.Skipped != len(names) {
			b.Fatalf("Sync = %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N), "s/sync")
	// CPU time says what the sync costs when other processes share the
	// machine and make wall time noisy; the set-up is not counted.
	user2, sys2 := cpuTimes()
	b.ReportMetric((user2+sys2-user-sys).Seconds()/float64(b.N), "cpu-s/sync")
	b.ReportMetric((sys2-sys).Seconds()/float64(b.N), "sys-s/sync")
}

// cpuTimes is the user and system time this process has used.
func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkSyncCopy copies 10,000 new 4 KiB bundles from one directory
// spool to an empty one, checking each (as the CLI does), and runs rsync -a
// (and rsync -a --fsync) on the same data in the same run for comparison:
// the target is within 2× of rsync -a. The directory backend syncs every
// object to disk before it becomes visible; rsync does not unless asked to.
func BenchmarkSyncCopy(b *testing.B) {
	s := newSigner(b)
	names := reportNames(10_000, 100)
	srcDir := b.TempDir()
	writeObjects(b, srcDir, names, func(_ int, n string) []byte { return s.bundle(b, n, 4096) })
	src, _ := spool.OpenDir(srcDir)
	rsync, rsyncErr := exec.LookPath("rsync")
	var syncTime, rsyncTime, rsyncFsyncTime time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dstDir := b.TempDir()
		dst, _ := spool.OpenDir(dstDir)
		b.StartTimer()
		start := time.Now()
		res, err := spool.Sync(b.Context(), src, dst, checked)
		syncTime += time.Since(start)
		if err != nil || res.Copied != len(names) {
			b.Fatalf("Sync = %+v, %v", res, err)
		}
		b.StopTimer()
		if rsyncErr == nil {
			for _, tc := range []struct {
				args []string
				sum  *time.Duration
			}{{[]string{"-a"}, &rsyncTime}, {[]string{"-a", "--fsync"}, &rsyncFsyncTime}} {
				out := b.TempDir()
				start := time.Now()
				cmd := exec.Command(rsync, append(tc.args, srcDir+"/", out+"/")...)
				if msg, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("rsync: %v: %s", err, msg)
				}
				*tc.sum += time.Since(start)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(syncTime.Seconds()/float64(b.N), "s/sync")
	if rsyncErr == nil {
		b.ReportMetric(rsyncTime.Seconds()/float64(b.N), "s/rsync-a")
		b.ReportMetric(rsyncFsyncTime.Seconds()/float64(b.N), "s/rsync-a-fsync")
		b.ReportMetric(float64(syncTime)/float64(rsyncTime), "x-rsync-a")
	} else {
		b.Log("rsync not installed: no comparison")
	}
}
