package spool_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/muster-tool/muster/spool"
)

// BenchmarkPutGet10KiB: one synced Put of a new 10 KiB object and one Get
// of it. The budget is 1 ms per round trip.
func BenchmarkPutGet10KiB(b *testing.B) {
	d, err := spool.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	data := bytes.Repeat([]byte("0123456789abcdef"), 640)
	b.SetBytes(int64(len(data)))
	i := 0
	for b.Loop() {
		name := spool.ReportName(fmt.Sprintf("n%d", i%100), uint64(i), 1)
		i++
		if err := d.Put(ctx, name, data); err != nil {
			b.Fatal(err)
		}
		got, err := d.Get(ctx, name, 0)
		if err != nil || len(got) != len(data) {
			b.Fatal(len(got), err)
		}
	}
}

// BenchmarkList100k lists one node's reports in a spool of 100,000
// objects (1,000 nodes with 100 reports each).
func BenchmarkList100k(b *testing.B) {
	root := b.TempDir()
	// Build the spool straight on disk: 100,000 synced Puts would take
	// minutes and measure nothing List depends on.
	for n := range 1000 {
		dir := filepath.Join(root, "report", fmt.Sprintf("n%04d", n))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for g := range 100 {
			name := spool.ReportName(fmt.Sprintf("n%04d", n), uint64(g), 1)
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte("r"), 0o444); err != nil {
				b.Fatal(err)
			}
		}
	}
	d, err := spool.OpenDir(root)
	if err != nil {
		b.Fatal(err)
	}
	for _, bench := range []struct{ name, prefix string }{
		{"node", "report/n0500/"},
		{"all", ""},
	} {
		b.Run(bench.name, func(b *testing.B) {
			for b.Loop() {
				n := 0
				if err := d.List(b.Context(), bench.prefix, func(spool.Info) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				if bench.prefix != "" && n != 100 || bench.prefix == "" && n != 100000 {
					b.Fatalf("listed %d objects", n)
				}
			}
		})
	}
	// ListNames: the same walk without a stat of every object.
	b.Run("all-names", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := d.ListNames(b.Context(), "", func(string) error { n++; return nil }); err != nil {
				b.Fatal(err)
			}
			if n != 100000 {
				b.Fatalf("listed %d objects", n)
			}
		}
	})
}
