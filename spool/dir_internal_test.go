package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func openTestDir(t *testing.T) *Dir {
	t.Helper()
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestListReadsOnlyThePrefix: listing one node's objects must not read the
// rest of the spool, or List would slow down with the size of the fleet.
func TestListReadsOnlyThePrefix(t *testing.T) {
	d := openTestDir(t)
	ctx := t.Context()
	for n := range 30 {
		for g := range 3 {
			if err := d.Put(ctx, ReportName(fmt.Sprintf("n%02d", n), uint64(g), 1), []byte("r")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Put(ctx, CommitName(1), []byte("c")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var read []string
	d.readDir = func(dir string) ([]fs.DirEntry, error) {
		rel, _ := filepath.Rel(d.root, dir)
		mu.Lock()
		read = append(read, filepath.ToSlash(rel))
		mu.Unlock()
		return readDirEntries(dir)
	}
	for _, tc := range []struct {
		prefix  string
		objects int
		read    []string
	}{
		{"report/n07/", 3, []string{"report/n07"}},
		{"report/n07/0000", 3, []string{"report/n07"}},
		{"report/n1", 30, []string{"report", "report/n10", "report/n11", "report/n12", "report/n13", "report/n14",
			"report/n15", "report/n16", "report/n17", "report/n18", "report/n19"}},
		{"commit/", 1, []string{"commit"}},
		{"decl/", 0, []string{"decl"}},
	} {
		read = nil
		objects := 0
		if err := d.List(ctx, tc.prefix, func(Info) error { objects++; return nil }); err != nil {
			t.Fatal(err)
		}
		slices.Sort(read) // subdirectories are read ahead, in parallel
		if objects != tc.objects || !slices.Equal(read, tc.read) {
			t.Errorf("List(%q): %d objects reading %q, want %d reading %q", tc.prefix, objects, read, tc.objects, tc.read)
		}
	}
}

// TestNoHardLinks: on a filesystem without hard links (FAT on a USB stick)
// Put falls back to a rename that never replaces, keeping create-if-absent:
// the kernel's rename without replacing where the filesystem has it, else
// (FAT and exFAT through FUSE) a rename under a lock.
func TestNoHardLinks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noRename bool
	}{
		{"renameat2", false},
		{"locked rename", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openTestDir(t)
			links, renames := 0, 0
			d.link = func(oldname, newname string) error {
				links++
				return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
			}
			if tc.noRename {
				d.renameNoReplace = func(oldname, newname string) error {
					renames++
					return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EINVAL}
				}
			}
			ctx := t.Context()
			if err := d.Put(ctx, "a/b", []byte("one")); err != nil {
				t.Fatal(err)
			}
			if got, err := d.Get(ctx, "a/b", 0); err != nil || string(got) != "one" {
				t.Fatalf("Get = %q, %v", got, err)
			}
			// A racing writer that lost: the name exists when it renames.
			if err := d.Put(ctx, "a/c", []byte("first")); err != nil {
				t.Fatal(err)
			}
			tmp, err := d.writeTemp("a/c", []byte("second"))
			if err != nil {
				t.Fatal(err)
			}
			if err := d.place(tmp, d.file("a/c")); !errors.Is(err, fs.ErrExist) {
				t.Errorf("rename over an existing object: %v, want ErrExist", err)
			}
			os.Remove(tmp)
			if got, _ := d.Get(ctx, "a/c", 0); string(got) != "first" {
				t.Errorf("the losing writer replaced the object: %q", got)
			}
			if err := d.Put(ctx, "a/c", []byte("second")); !errors.Is(err, ErrConflict) {
				t.Errorf("Put of different bytes: %v, want ErrConflict", err)
			}
			if links == 0 || tc.noRename && renames == 0 {
				t.Error("the seams were not used")
			}
			n := 0
			d.Temps(ctx, func(string, time.Duration) error { n++; return nil })
			if n != 0 {
				t.Errorf("%d temp files left", n)
			}
		})
	}
}

// TestListReadAhead: subdirectories are read ahead and in parallel, yet
// fn sees every object once, in order; List and ListNames agree; an error
// from fn, a directory that cannot be read and a cancelled context each
// stop the walk with that error.
func TestListReadAhead(t *testing.T) {
	d := openTestDir(t)
	ctx := t.Context()
	var want []string
	for n := range 60 {
		for g := range 3 {
			name := ReportName(fmt.Sprintf("n%02d", n), uint64(g), 1)
			if err := d.Put(ctx, name, []byte("r")); err != nil {
				t.Fatal(err)
			}
			want = append(want, name)
		}
		name := fmt.Sprintf("report/n%02d.x", n) // sorts before report/n%02d/
		if n%7 == 0 {
			if err := d.Put(ctx, name, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"a/b/c/d", "a/b/c/e", "a/b/d", "a/c", "b"} {
		if err := d.Put(ctx, name, []byte("o")); err != nil {
			t.Fatal(err)
		}
	}
	for _, prefix := range []string{"", "report/", "report/n1", "a/", "a/b/c"} {
		var listed, named []string
		if err := d.List(ctx, prefix, func(i Info) error { listed = append(listed, i.Name); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := d.ListNames(ctx, prefix, func(n string) error { named = append(named, n); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(listed) || !slices.Equal(listed, named) || len(listed) == 0 {
			t.Errorf("prefix %q: List gave %q, ListNames %q", prefix, listed, named)
		}
	}
	var got []string
	if err := d.ListNames(ctx, "report/n", func(n string) error {
		if !strings.HasSuffix(n, ".x") {
			got = append(got, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d reports, want %d in order", len(got), len(want))
	}

	stop := errors.New("stop")
	n := 0
	err := d.ListNames(ctx, "report/", func(string) error {
		if n++; n == 40 {
			return stop
		}
		return nil
	})
	if err != stop || n != 40 {
		t.Errorf("fn's error after %d objects: %v", n, err)
	}

	broken := errors.New("disk on fire")
	d.readDir = func(dir string) ([]fs.DirEntry, error) {
		if filepath.Base(dir) == "n33" {
			return nil, broken
		}
		return readDirEntries(dir)
	}
	n = 0
	err = d.ListNames(ctx, "report/", func(string) error { n++; return nil })
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "report/n33/") || n != 33*3+5 {
		t.Errorf("a directory that cannot be read: %v after %d objects", err, n)
	}
	d.readDir = readDirEntries

	cctx, cancel := context.WithCancel(ctx)
	n = 0
	err = d.ListNames(cctx, "report/", func(string) error {
		if n++; n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n > 12 {
		t.Errorf("cancelled after 10 objects: %v after %d", err, n)
	}
}

// TestRemoveEmptyDir: spool gc's removal of a directory it emptied leaves
// a directory that holds anything, and a Put whose directory is removed
// between making it and placing the object makes it again.
func TestRemoveEmptyDir(t *testing.T) {
	d := openTestDir(t)
	ctx := t.Context()
	const first, second = "enrol/join/0123/aaaa", "enrol/join/0123/bbbb"
	for _, n := range []string{first, second} {
		if err := d.Put(ctx, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(d.Path(), "enrol", "join", "0123")
	if err := d.RemoveEmptyDir(ctx, "enrol/join/0123/"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "aaaa")); err != nil {
		t.Fatalf("a directory holding objects was removed: %v", err)
	}
	if err := d.RemoveEmptyDir(ctx, first+"/"); err != nil {
		t.Errorf("an object's name as a directory: %v, want it left alone", err)
	}
	if err := d.RemoveEmptyDir(ctx, "enrol/join/0123"); err == nil {
		t.Error("a name not ending in / was taken for a directory")
	}
	for _, n := range []string{first, second} {
		if err := d.Delete(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.RemoveEmptyDir(ctx, "enrol/join/0123/"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the emptied directory: %v, want it gone", err)
	}
	if err := d.RemoveEmptyDir(ctx, "enrol/join/0123/"); err != nil {
		t.Errorf("a directory that is not there: %v", err)
	}

	// The race: mkdirs made the directory, gc removed it, then the
	// object is placed.
	if err := d.mkdirs(first); err != nil {
		t.Fatal(err)
	}
	tmp, err := d.writeTemp(first, []byte("again"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp)
	if err := d.RemoveEmptyDir(ctx, "enrol/join/0123/"); err != nil {
		t.Fatal(err)
	}
	if err := d.placeIn(first, tmp, d.file(first)); err != nil {
		t.Fatalf("placing after the directory went: %v", err)
	}
	if got, err := d.Get(ctx, first, 100); err != nil || string(got) != "again" {
		t.Errorf("read back %q, %v", got, err)
	}
}
