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
// HEAD and a DELETE).
type oneByOne struct{ spool.Spool }

// BenchmarkS3DeleteMany removes objects from versitygw on loopback, as
// spool gc does, with a thousand a request (how=batch) and one by one
// (how=each), in turn, round after round (MUSTER_BENCH_DELETE_ROUNDS,
// default 2). delay= holds each request that long in a proxy, as a store
// across a network answers later than one on loopback.
// MUSTER_BENCH_DELETE_OBJECTS sets how many objects (default 10,000),
// laid out in the store's directory before each removal, untimed, as the
// reports of a thousand nodes. The store's CPU time per removal is
// store-cpu-s/op: on two cores the two processes share them.
//
//	go test -run '^$' -bench S3DeleteMany ./spool
func BenchmarkS3DeleteMany(b *testing.B) {
	objects := 10_000
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_DELETE_OBJECTS")); err == nil && n > 0 {
		objects = n
	}
	rounds := 2
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_DELETE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	srv := s3server.Start(b)
	srv.SetEnv(b)
	root := filepath.Join(srv.Dir(), s3server.Bucket, "gc")
	names := make([]string, objects)
	for i := range names {
		names[i] = spool.ReportName(fmt.Sprintf("%032x", i%1000), uint64(i/1000+1), 1)
	}
	layOut := func(b *testing.B) {
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
				b.Run(fmt.Sprintf("objects=%d/delay=%v/how=%s", objects, delay, how), func(b *testing.B) {
					proxy.SetDelay(delay)
					var cpu, store time.Duration
					requests := 0
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						layOut(b)
						proxy.Reset()
						cpu0, store0 := processCPU(), srv.CPUTime()
						b.StartTimer()
						gone, err := spool.DeleteMany(b.Context(), sp, names)
						b.StopTimer()
						cpu += processCPU() - cpu0
						store += srv.CPUTime() - store0
						for _, n := range proxy.Count() {
							requests += n
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
					b.ReportMetric(store.Seconds()/float64(b.N), "store-cpu-s/op")
					b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
				})
			}
		}
	}
}
