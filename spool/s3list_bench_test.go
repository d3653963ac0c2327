package spool_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// BenchmarkS3ListBriefings lists the briefings of a fleet from versitygw
// on loopback, each below a node id drawn at random as key fingerprints
// are: page after page (pages=serial, as before) and in ranges
// (pages=ranges), in turn, round after round (MUSTER_BENCH_LIST_ROUNDS,
// default 2; a round's names repeat, with #01 and so on). delay= holds each request that long in a proxy,
// as a store across a network answers later than one on loopback.
// MUSTER_BENCH_LIST_NODES sets the fleet's size (default 10,000). The
// store's CPU time per listing is store-cpu-s/op: on two cores the two
// processes share them.
//
//	go test -run '^$' -bench S3ListBriefings -count 3 ./spool
func BenchmarkS3ListBriefings(b *testing.B) {
	nodes := 10_000
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_LIST_NODES")); err == nil && n > 0 {
		nodes = n
	}
	srv := s3server.Start(b)
	srv.SetEnv(b)
	// The store serves the files its posix backend finds: laid out
	// there directly, the fleet takes seconds rather than 100,000 PUTs.
	root := filepath.Join(srv.Dir(), s3server.Bucket, "list")
	id := make([]byte, 16)
	for range nodes {
		rand.Read(id)
		name := spool.BriefName(hex.EncodeToString(id), 1)
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("briefing"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	proxy := srv.Proxy(b)
	sp, err := spool.Open(proxy.URL("list"))
	if err != nil {
		b.Fatal(err)
	}
	rounds := 2
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_LIST_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	defer spool.SetListInRanges(true)
	for range rounds {
		for _, delay := range []time.Duration{0, 30 * time.Millisecond} {
			for _, ranges := range []bool{false, true} {
				b.Run(fmt.Sprintf("nodes=%d/delay=%v/pages=%s", nodes, delay, map[bool]string{false: "serial", true: "ranges"}[ranges]), func(b *testing.B) {
					proxy.SetDelay(delay)
					spool.SetListInRanges(ranges)
					proxy.Reset()
					cpu0, store0 := processCPU(), srv.CPUTime()
					for b.Loop() {
						n := 0
						if err := spool.ListQuick(b.Context(), sp, spool.BriefPrefix, func(spool.Info) error { n++; return nil }); err != nil {
							b.Fatal(err)
						}
						if n != nodes {
							b.Fatalf("listed %d briefings, want %d", n, nodes)
						}
					}
					b.ReportMetric((processCPU()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
					b.ReportMetric((srv.CPUTime()-store0).Seconds()/float64(b.N), "store-cpu-s/op")
					b.ReportMetric(float64(proxy.Count()[s3server.KindList])/float64(b.N), "lists/op")
				})
			}
		}
	}
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
