package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	var read []string
	d.readDir = func(dir string) ([]fs.DirEntry, error) {
		rel, _ := filepath.Rel(d.root, dir)
		read = append(read, filepath.ToSlash(rel))
		return readDirUnsorted(dir)
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
		if objects != tc.objects || !slices.Equal(read, tc.read) {
			t.Errorf("List(%q): %d objects reading %q, want %d reading %q", tc.prefix, objects, read, tc.objects, tc.read)
		}
	}
}

// TestNoHardLinks: on a filesystem without hard links (FAT on a USB stick)
// Put falls back to a rename that never replaces, keeping create-if-absent.
func TestNoHardLinks(t *testing.T) {
	d := openTestDir(t)
	links := 0
	d.link = func(oldname, newname string) error {
		links++
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
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
	if links == 0 {
		t.Error("the link seam was not used")
	}
	n := 0
	d.Temps(ctx, func(string, time.Duration) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d temp files left", n)
	}
}
