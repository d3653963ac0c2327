package spool_test

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/spool"
)

// namesOnly hides a spool's own listings, so that ListDirs takes the
// listing of names any backend has.
type namesOnly struct{ spool.Spool }

// dirsListed runs ListDirs with known, returning each directory's
// listing by its prefix.
func dirsListed(t *testing.T, sp spool.Spool, prefix string, known func(string, spool.DirStamp) bool) map[string]spool.DirListing {
	t.Helper()
	var mu sync.Mutex // known may be called at once from several goroutines
	var order []string
	got := map[string]spool.DirListing{}
	err := spool.ListDirs(t.Context(), sp, prefix, func(dir string, st spool.DirStamp) bool {
		mu.Lock()
		defer mu.Unlock()
		return known(dir, st)
	}, func(l spool.DirListing) error {
		order = append(order, l.Dir)
		got[l.Dir] = l
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(order) {
		t.Errorf("directories listed out of order: %q", order)
	}
	return got
}

func never(string, spool.DirStamp) bool { return false }

// TestListDirsNames: every backend lists the objects directly in each
// directory below the prefix, and nothing else.
func TestListDirsNames(t *testing.T) {
	d := openDir(t)
	for _, name := range []string{
		"report/a/1", "report/a/2", "report/a-b/1", "report/b/1",
		"report/stray", "report/c/d/deeper", "brief/a/1",
	} {
		put(t, d, name, []byte(name))
	}
	want := map[string][]string{
		"report/a/":   {"report/a/1", "report/a/2"},
		"report/a-b/": {"report/a-b/1"},
		"report/b/":   {"report/b/1"},
	}
	for _, sp := range []spool.Spool{d, namesOnly{d}} {
		got := dirsListed(t, sp, "report/", never)
		if len(got) != len(want) {
			t.Errorf("%T: listed %v, want %v", sp, got, want)
		}
		for dir, names := range want {
			if l := got[dir]; !slices.Equal(l.Names, names) || l.Known {
				t.Errorf("%T: %s listed as %+v, want the names %q", sp, dir, l, names)
			}
		}
		if got := dirsListed(t, sp, "nothing/", never); len(got) != 0 {
			t.Errorf("%T: a prefix with nothing below it listed %v", sp, got)
		}
	}
	err := spool.ListDirs(t.Context(), d, "report", never, func(spool.DirListing) error { return nil })
	if err == nil {
		t.Error("a prefix not ending in / was taken")
	}
}

// TestListDirsStamps: a directory whose stamp is the one recorded is not
// read, and every way of changing what it holds gives it another stamp,
// so the change is seen.
func TestListDirsStamps(t *testing.T) {
	// Each listing below waits out a settle shorter than the default but
	// longer than any tick of the clock that stamps directories: a change
	// in the tick of a listing could keep the stamp it gave (which is why
	// stamps settle).
	const settle = 50 * time.Millisecond
	spool.SetStampSettle(t, settle)
	d, err := spool.OpenDir(mountTmpfs(t, "16m"))
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, "report/a/1", []byte("one"))
	put(t, d, "report/b/1", []byte("one"))
	recorded := map[string]spool.DirStamp{}
	record := func() map[string]spool.DirListing {
		t.Helper()
		time.Sleep(settle + 10*time.Millisecond)
		got := dirsListed(t, d, "report/", func(dir string, st spool.DirStamp) bool { return recorded[dir] == st })
		for dir, l := range got {
			if l.Stamp.IsZero() {
				t.Fatalf("%s has no stamp on tmpfs", dir)
			}
			recorded[dir] = l.Stamp
		}
		return got
	}
	// wantRead checks that only directory a was read, holding names.
	wantRead := func(how string, names ...string) {
		t.Helper()
		got := record()
		if l := got["report/a/"]; l.Known || !slices.Equal(l.Names, names) {
			t.Errorf("after %s, report/a/ was listed as %+v, want it read with %q", how, l, names)
		}
		if l := got["report/b/"]; !l.Known || l.Names != nil {
			t.Errorf("after %s, report/b/ was listed as %+v, want it known", how, l)
		}
	}
	if got := record(); got["report/a/"].Known || got["report/b/"].Known {
		t.Fatalf("known before anything was recorded: %+v", got)
	}
	got := record()
	for _, dir := range []string{"report/a/", "report/b/"} {
		if l := got[dir]; !l.Known || l.Names != nil || l.Stamp != recorded[dir] {
			t.Errorf("unchanged %s listed as %+v, want known with its stamp", dir, l)
		}
	}

	dirA := filepath.Join(d.Path(), "report", "a")
	put(t, d, "report/a/2", []byte("two"))
	wantRead("a Put", "report/a/1", "report/a/2")

	if err := d.Delete(t.Context(), "report/a/1"); err != nil {
		t.Fatal(err)
	}
	wantRead("a Delete", "report/a/2")

	// rsync -a and cp -p set a directory's times back after copying
	// into it.
	fi, err := os.Stat(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirA, "3"), []byte("three"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dirA, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	wantRead("a copy that kept the directory's times", "report/a/2", "report/a/3")

	// A directory removed and made again with what it held.
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	put(t, d, "report/a/2", []byte("two"))
	put(t, d, "report/a/3", []byte("three"))
	wantRead("the directory made again", "report/a/2", "report/a/3")
}

// TestListDirsSettle: a directory changed just before the listing has no
// stamp, so it is read whatever was recorded: it may change again within
// the tick of the clock that stamped it.
func TestListDirsSettle(t *testing.T) {
	d, err := spool.OpenDir(mountTmpfs(t, "16m"))
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, "report/a/1", []byte("one"))
	asked := false
	got := dirsListed(t, d, "report/", func(string, spool.DirStamp) bool { asked = true; return true })
	if l := got["report/a/"]; !l.Stamp.IsZero() || l.Known || len(l.Names) != 1 || asked {
		t.Errorf("a directory changed just now was listed as %+v (known asked: %v), want it read with no stamp", l, asked)
	}
	// Once settled it has one.
	fi, err := os.Stat(filepath.Join(d.Path(), "report", "a"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(fi.ModTime().Add(spool.StampSettle + 10*time.Millisecond)))
	if l := dirsListed(t, d, "report/", never)["report/a/"]; l.Stamp.IsZero() {
		t.Errorf("a directory left alone for %v has no stamp: %+v", spool.StampSettle, l)
	}
}

// testFATStamps: on FAT and exFAT a directory's times do not show every
// change, so no directory there has a stamp and every one is read.
func testFATStamps(t *testing.T, d *spool.Dir) {
	spool.SetStampSettle(t, 0)
	put(t, d, "report/a/1", []byte("one"))
	asked := false
	for range 2 {
		got := dirsListed(t, d, "report/", func(string, spool.DirStamp) bool { asked = true; return true })
		if l := got["report/a/"]; !l.Stamp.IsZero() || l.Known || len(l.Names) != 1 || asked {
			t.Errorf("on FAT, report/a/ was listed as %+v (known asked: %v), want it read with no stamp", l, asked)
		}
	}
}
