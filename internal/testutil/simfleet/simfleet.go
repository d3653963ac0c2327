// Package simfleet keeps the simulated fleets the 100,000-node benchmarks
// run on: a mesh with its spool of join requests, reports or other objects
// that take minutes to make (every bundle is sealed for real). A fleet is
// made once, in a cache directory outside the checkout named after what
// it holds (its kind, its sizes and the version of the code that makes
// it), and reused by every later run; each run works on a copy whose
// objects are hard links to the cached ones, which is safe because
// objects are write-once.
//
// The benchmarks that use it are skipped unless MUSTER_BENCH_FLEET=1 is
// set, as `make bench-fleet` does: they take minutes and gigabytes. The
// cache is $MUSTER_FLEET_CACHE, or muster-bench-fleet in the user's cache
// directory ($XDG_CACHE_HOME or ~/.cache); remove it to make the fleets
// again.
package simfleet

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Enabled skips tb unless the fleet benchmarks were asked for.
func Enabled(tb testing.TB) {
	tb.Helper()
	if os.Getenv("MUSTER_BENCH_FLEET") != "1" {
		tb.Skip("a fleet benchmark: set MUSTER_BENCH_FLEET=1 (make bench-fleet) to run it")
	}
}

// Cache returns the cache directory of the fleet named by kind and params,
// making it with build when it is not there whole yet. build writes into
// the directory it is given; only a build that returns nil is kept.
func Cache(tb testing.TB, kind string, params string, build func(dir string) error) string {
	tb.Helper()
	dir := filepath.Join(Root(tb), kind+"-"+strings.ReplaceAll(params, "/", "-"))
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	tmp := dir + ".making"
	if err := os.RemoveAll(tmp); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("simfleet: making %s (once; later runs reuse it)", dir)
	if err := build(tmp); err != nil {
		os.RemoveAll(tmp)
		tb.Fatalf("simfleet: making %s: %v", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// Root is the cache directory every fleet is kept in, for a benchmark
// that keeps its fleet itself.
func Root(tb testing.TB) string {
	tb.Helper()
	if root := os.Getenv("MUSTER_FLEET_CACHE"); root != "" {
		return root
	}
	base, err := os.UserCacheDir()
	if err != nil {
		tb.Fatalf("simfleet: no cache directory: %v (set MUSTER_FLEET_CACHE)", err)
	}
	return filepath.Join(base, "muster-bench-fleet")
}

// Link copies the tree src to dst, which must not exist yet, each regular
// file a hard link to the original and each directory new, with the
// original's mode: a copy to work on that costs no data,
// for trees whose files are never changed in place (spool objects). A file
// that is changed in place (a mesh's own files) must be copied with Copy.
func Link(tb testing.TB, src, dst string) {
	tb.Helper()
	walk(tb, src, dst, func(from, to string) error { return os.Link(from, to) })
}

// Copy copies the tree src to dst, file by file.
func Copy(tb testing.TB, src, dst string) {
	tb.Helper()
	walk(tb, src, dst, func(from, to string) error {
		data, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		fi, err := os.Stat(from)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, fi.Mode().Perm())
	})
}

func walk(tb testing.TB, src, dst string, file func(from, to string) error) {
	tb.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			// The source's mode: a key directory must stay private.
			return os.Mkdir(to, fi.Mode().Perm())
		case d.Type().IsRegular():
			return file(p, to)
		}
		return fmt.Errorf("%s: neither a file nor a directory", p)
	})
	if err != nil {
		tb.Fatalf("simfleet: copy %s to %s: %v", src, dst, err)
	}
}
