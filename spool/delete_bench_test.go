package spool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// oneByOne hides a spool's batch removal, so that DeleteMany removes its
// objects as spool gc did before: 32 at a time, each with Delete (on S3 a
// HEAD and a DELETE; on a directory an unlink and a sync of its
// directory).
type oneByOne struct{ spool.Spool }

// deleteBench is the setting of the DeleteMany benchmarks:
// MUSTER_BENCH_DELETE_OBJECTS objects (default 10,000), as the reports of
// a thousand nodes, removed in MUSTER_BENCH_DELETE_ROUNDS rounds (default
// 2) of each way in turn.
func deleteBench() (names []string, rounds int) {
	objects := 10_000
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_DELETE_OBJECTS")); err == nil && n > 0 {
		objects = n
	}
	rounds = 2
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_DELETE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	names = make([]string, objects)
	for i := range names {
		names[i] = spool.ReportName(fmt.Sprintf("%032x", i%1000), uint64(i/1000+1), 1)
	}
	return names, rounds
}

// layOut writes each named object as a file under root, as the directory
// backend and versitygw's posix backend keep them.
func layOut(b *testing.B, root string, names []string) {
	for _, name := range names {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("report"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDeleteMany times DeleteMany of names on sp, after fill has put
// them back, untimed. store, if not nil, gives the store's CPU time so far.
func benchDeleteMany(b *testing.B, sp spool.Spool, names []string, fill func(), store func() time.Duration) {
	var cpu, storeCPU time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fill()
		cpu0 := processCPU()
		var store0 time.Duration
		if store != nil {
			store0 = store()
		}
		b.StartTimer()
		gone, err := spool.DeleteMany(b.Context(), sp, names)
		b.StopTimer()
		cpu += processCPU() - cpu0
		if store != nil {
			storeCPU += store() - store0
		}
		if err != nil {
			b.Fatal(err)
		}
		for j, g := range gone {
			if !g {
				b.Fatalf("%s not removed", names[j])
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	if store != nil {
		b.ReportMetric(storeCPU.Seconds()/float64(b.N), "store-cpu-s/op")
	}
}

// BenchmarkS3DeleteMany removes objects from versitygw on loopback, as
// spool gc does, with a thousand a request (how=batch) and one by one
// (how=each), in turn, round after round (see deleteBench). delay= holds
// each request that long in a proxy, as a store across a network answers
// later than one on loopback. The objects are laid out in the store's
// directory before each removal. cpu-s/op includes the proxy's; the
// store's CPU time is store-cpu-s/op: on two cores the processes share
// them.
//
//	go test -run '^$' -bench S3DeleteMany ./spool
func BenchmarkS3DeleteMany(b *testing.B) {
	names, rounds := deleteBench()
	srv := s3server.Start(b)
	srv.SetEnv(b)
	root := filepath.Join(srv.Dir(), s3server.Bucket, "gc")
	proxy := srv.Proxy(b)
	s3, err := spool.Open(proxy.URL("gc"))
	if err != nil {
		b.Fatal(err)
	}
	for range rounds {
		for _, delay := range []time.Duration{0, 30 * time.Millisecond} {
			for _, how := range []string{"batch", "each"} {
				sp := s3
				if how == "each" {
					sp = oneByOne{s3}
				}
				b.Run(fmt.Sprintf("objects=%d/delay=%v/how=%s", len(names), delay, how), func(b *testing.B) {
					proxy.SetDelay(delay)
					requests := 0
					benchDeleteMany(b, sp, names, func() {
						layOut(b, root, names)
						for _, n := range proxy.Count() {
							requests += n
						}
						proxy.Reset()
					}, srv.CPUTime)
					for _, n := range proxy.Count() {
						requests += n
					}
					b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
				})
			}
		}
	}
}

// BenchmarkDirDeleteMany removes objects from a directory spool, with
// each directory synced once (how=batch) and one by one (how=each), in
// turn, round after round (see deleteBench).
//
//	go test -run '^$' -bench DirDeleteMany ./spool
func BenchmarkDirDeleteMany(b *testing.B) {
	names, rounds := deleteBench()
	root := b.TempDir()
	d, err := spool.OpenDir(root)
	if err != nil {
		b.Fatal(err)
	}
	for range rounds {
		for _, how := range []string{"batch", "each"} {
			var sp spool.Spool = d
			if how == "each" {
				sp = oneByOne{d}
			}
			b.Run(fmt.Sprintf("objects=%d/how=%s", len(names), how), func(b *testing.B) {
				benchDeleteMany(b, sp, names, func() { layOut(b, root, names) }, nil)
			})
		}
	}
}
