package spool_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
	"github.com/muster-tool/muster/spool/spooltest"
)

func openDir(t *testing.T) *spool.Dir {
	t.Helper()
	d, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDirConformance(t *testing.T) {
	spooltest.Run(t, func(t *testing.T) spool.Spool { return openDir(t) })
}

// TestDirConformanceLockedRename runs the suite as on FAT or exFAT through
// FUSE, with neither hard links nor rename without replacing, on any
// filesystem; TestFAT runs it on the real ones where it may mount them.
func TestDirConformanceLockedRename(t *testing.T) {
	spooltest.Run(t, func(t *testing.T) spool.Spool {
		d := openDir(t)
		spool.WithoutNoReplace(d)
		return d
	})
}

func listNames(t *testing.T, s spool.Spool, prefix string) []string {
	t.Helper()
	var got []string
	err := s.List(t.Context(), prefix, func(i spool.Info) error {
		got = append(got, i.Name)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

func temps(t *testing.T, d *spool.Dir) map[string]time.Duration {
	t.Helper()
	found := map[string]time.Duration{}
	err := d.Temps(t.Context(), func(path string, age time.Duration) error {
		found[path] = age
		return nil
	})
	if err != nil {
		t.Fatalf("Temps: %v", err)
	}
	return found
}

func TestOpenDirMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not-mounted")
	d, err := spool.OpenDir(missing)
	if d != nil || err == nil {
		t.Fatalf("OpenDir of a missing directory = %v, %v", d, err)
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("error %q does not name the directory", err)
	}
	// Nothing makes it appear by itself: a failure, not "try again
	// later", with the command that creates it.
	if errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) != fault.Failure {
		t.Errorf("error %v: class %v, want a failure, not ErrUnavailable", err, fault.ClassOf(err))
	}
	if h := fault.HintOf(err); !strings.Contains(h, "mkdir -p "+missing) {
		t.Errorf("hint %q does not say how to create it", h)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Error("OpenDir created the directory")
	}
}

func TestOpenDirNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := spool.OpenDir(file)
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("OpenDir of a file: %v, want an error naming it", err)
	}
	if fault.ClassOf(err) == fault.Temporary {
		t.Errorf("a file in place of the spool is not temporary: %v", err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("sp", 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "sp")
	for _, loc := range []string{abs, "sp", "dir:" + abs, "dir:sp", "file://" + abs, "file://localhost" + abs} {
		s, err := spool.Open(loc)
		if err != nil {
			t.Errorf("Open(%q): %v", loc, err)
			continue
		}
		if got := s.String(); got != "dir:"+abs {
			t.Errorf("Open(%q).String() = %q, want %q", loc, got, "dir:"+abs)
		}
	}
	for _, tc := range []struct {
		loc, says string
		class     fault.Class
	}{
		{"", "--spool", fault.Usage},
		{"dir:", "no directory", fault.Usage},
		{"s3://bucket/prefix?bogus=1", "unknown parameter", fault.Usage},
		{"ftp://host/x", `"ftp"`, fault.Usage},
		{"file://otherhost/x", "otherhost", fault.Usage},
		{filepath.Join(dir, "missing"), "does not exist", fault.Failure},
	} {
		s, err := spool.Open(tc.loc)
		if err == nil || s != nil {
			t.Errorf("Open(%q) = %v, %v, want a nil spool and an error", tc.loc, s, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) || fault.ClassOf(err) != tc.class {
			t.Errorf("Open(%q): %q (%v), want %v mentioning %s", tc.loc, err, fault.ClassOf(err), tc.class, tc.says)
		}
	}
}

// TestLayout pins how names map to files: people copy spools with cp and
// rsync and look inside them, and other backends' sync relies on it.
func TestLayout(t *testing.T) {
	d := openDir(t)
	name := spool.ReportName("n1", 3, 1)
	data := []byte("sealed report")
	if err := d.Put(t.Context(), name, data); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(d.Path(), "report", "n1", "00000000000000000003-00000000000000000001")
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object file %s: %q, %v", file, got, err)
	}
	fi, _ := os.Stat(file)
	if fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("object file mode %v is writable; objects are immutable", fi.Mode())
	}
	if d.String() != "dir:"+d.Path() || !filepath.IsAbs(d.Path()) {
		t.Errorf("String() = %q, Path() = %q", d.String(), d.Path())
	}
	if left := temps(t, d); len(left) != 0 {
		t.Errorf("Put left temp files: %v", left)
	}
}

// TestForeignFilesInvisible: temp files, rsync's partial files and anything
// else that cannot be an object never show up in List.
func TestForeignFilesInvisible(t *testing.T) {
	d := openDir(t)
	ctx := t.Context()
	for _, n := range []string{"report/n1/a", "report/n1/b"} {
		if err := d.Put(ctx, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	root := d.Path()
	foreign := map[string]string{
		atomicfile.TempPrefix + "0123456789abcdef":                "half an obj",
		"report/n1/" + atomicfile.TempPrefix + "x":                "stray temp",
		"report/n1/.c.Ab12Cd":                                     "rsync partial file",
		"report/n1/README":                                        "upper case",
		"report/n1/with space":                                    "space",
		"report/.hidden/obj":                                      "under a dot directory",
		"report/n1/" + strings.Repeat("x", spool.MaxSegmentLen+1): "too long",
	}
	for rel, content := range foreign {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", filepath.Join(root, "report", "n1", "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "report", "n1", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"report/n1/a", "report/n1/b"}
	for _, prefix := range []string{"", "report/", "report/n1/"} {
		if got := listNames(t, d, prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want only %q", prefix, got, want)
		}
		var named []string
		if err := d.ListNames(ctx, prefix, func(n string) error { named = append(named, n); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(named, want) {
			t.Errorf("ListNames(%q) = %q, want only %q", prefix, named, want)
		}
	}
	// What List does not show, Get and Stat do not find.
	for _, name := range []string{"report/n1/link", "report/n1/fifo"} {
		if _, err := d.Get(ctx, name, 0); !errors.Is(err, spool.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", name, err)
		}
		if _, err := d.Stat(ctx, name); !errors.Is(err, spool.ErrNotFound) {
			t.Errorf("Stat(%q): %v, want ErrNotFound", name, err)
		}
	}
	got := temps(t, d)
	wantTemp := filepath.Join(root, atomicfile.TempPrefix+"0123456789abcdef")
	if _, ok := got[wantTemp]; !ok || len(got) != 1 {
		t.Errorf("Temps found %v, want only %s", got, wantTemp)
	}
}

// TestCrashMidWrite: a Put that died after writing part of its temp file
// leaves no object, and gc can find and remove what it left.
func TestCrashMidWrite(t *testing.T) {
	d := openDir(t)
	name := spool.CommitName(7)
	full := bytes.Repeat([]byte("commit "), 1000)
	tmp := filepath.Join(d.Path(), atomicfile.TempPrefix+"deadbeefdeadbeef")
	if err := os.WriteFile(tmp, full[:100], 0o444); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	// A later process opening the spool sees nothing of it.
	d, err := spool.OpenDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, d, ""); len(got) != 0 {
		t.Errorf("List after a crashed Put = %q, want nothing", got)
	}
	if _, err := d.Get(t.Context(), name, 0); !errors.Is(err, spool.ErrNotFound) {
		t.Errorf("Get after a crashed Put: %v, want ErrNotFound", err)
	}
	// The name is still free for a whole object.
	if err := d.Put(t.Context(), name, full); err != nil {
		t.Fatal(err)
	}
	found := temps(t, d)
	if age, ok := found[tmp]; !ok || age < 2*time.Hour || len(found) != 1 {
		t.Fatalf("Temps = %v, want %s aged at least 2h", found, tmp)
	}
	if err := d.RemoveTemp(tmp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("RemoveTemp left %s", tmp)
	}
	if got, _ := d.Get(t.Context(), name, 0); !bytes.Equal(got, full) {
		t.Error("object damaged by removing a temp file")
	}
}

// TestCrashAfterLink: a Put that died between linking the object into place
// and removing its temp name leaves a whole object plus a temp file that
// shares its bytes; removing the temp keeps the object.
func TestCrashAfterLink(t *testing.T) {
	d := openDir(t)
	name := spool.AdmitName("tok1")
	data := []byte("admission")
	if err := d.Put(t.Context(), name, data); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(d.Path(), atomicfile.TempPrefix+"0000000000000001")
	if err := os.Link(filepath.Join(d.Path(), "enrol", "admit", "tok1"), tmp); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, d, ""); !slices.Equal(got, []string{name}) {
		t.Errorf("List = %q, want only %s", got, name)
	}
	for path := range temps(t, d) {
		if err := d.RemoveTemp(path); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := d.Get(t.Context(), name, 0); err != nil || !bytes.Equal(got, data) {
		t.Errorf("after gc Get = %q, %v", got, err)
	}
}

func TestRemoveTempRefusesObjects(t *testing.T) {
	d := openDir(t)
	if err := d.Put(t.Context(), "mesh/keys", []byte("k")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join(d.Path(), "mesh", "keys"),
		filepath.Join(d.Path(), "mesh", atomicfile.TempPrefix+"x"), // temps live only at the top
		filepath.Join(filepath.Dir(d.Path()), atomicfile.TempPrefix+"x"),
		d.Path(),
	} {
		if err := d.RemoveTemp(p); err == nil {
			t.Errorf("RemoveTemp(%s) = nil, want a refusal", p)
		}
	}
	if _, err := d.Get(t.Context(), "mesh/keys", 0); err != nil {
		t.Errorf("object gone after refused RemoveTemp: %v", err)
	}
}

// TestNameClash: a name cannot be both an object and a directory of
// objects; the layout never asks for it and the directory backend says no.
func TestNameClash(t *testing.T) {
	d := openDir(t)
	ctx := t.Context()
	for _, n := range []string{"a/b", "x/y/z"} {
		if err := d.Put(ctx, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a/b/c", "a/b/c/d", "x/y", "x"} {
		err := d.Put(ctx, n, []byte("other"))
		if !errors.Is(err, spool.ErrConflict) || !strings.Contains(err.Error(), n) {
			t.Errorf("Put(%q): %v, want ErrConflict naming it", n, err)
		}
	}
	if got := listNames(t, d, ""); !slices.Equal(got, []string{"a/b", "x/y/z"}) {
		t.Errorf("List = %q after refused Puts", got)
	}
	if left := temps(t, d); len(left) != 0 {
		t.Errorf("refused Puts left temp files: %v", left)
	}
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory, or skips the
// test where mounting is not allowed.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func wantUnavailable(t *testing.T, err error, name string) {
	t.Helper()
	if !errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) != fault.Temporary {
		t.Fatalf("error %v: want ErrUnavailable, class temporary (got %v)", err, fault.ClassOf(err))
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not name the object %s", err, name)
	}
	if fault.HintOf(err) == "" {
		t.Errorf("error %q has no hint", err)
	}
}

// TestReadOnly: writing to a spool on a read-only filesystem (or one this
// user may not write) is a temporary failure, not a plain one, so a timer
// retries; reading it still works.
func TestReadOnly(t *testing.T) {
	var dir string
	if os.Geteuid() == 0 {
		// root ignores permission bits: use a read-only mount.
		dir = mountTmpfs(t, "4m")
	} else {
		dir = t.TempDir()
	}
	d, err := spool.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := d.Put(ctx, "mesh/keys", []byte("keys")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			t.Skipf("cannot remount read-only: %v", err)
		}
	} else {
		for _, p := range []string{dir, filepath.Join(dir, "mesh")} {
			if err := os.Chmod(p, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(p, 0o755) })
		}
	}
	name := spool.ReportName("n1", 1, 1)
	wantUnavailable(t, d.Put(ctx, name, []byte("report")), name)
	wantUnavailable(t, d.Put(ctx, "mesh/other", []byte("x")), "mesh/other")
	wantUnavailable(t, d.Delete(ctx, "mesh/keys"), "mesh/keys")
	if got, err := d.Get(ctx, "mesh/keys", 0); err != nil || string(got) != "keys" {
		t.Errorf("Get from a read-only spool: %q, %v", got, err)
	}
	// Re-putting what is there needs no write; a conflict is still one.
	if err := d.Put(ctx, "mesh/keys", []byte("keys")); err != nil {
		t.Errorf("re-putting identical bytes on a read-only spool: %v", err)
	}
	if err := d.Put(ctx, "mesh/keys", []byte("other")); !errors.Is(err, spool.ErrConflict) {
		t.Errorf("conflicting Put on a read-only spool: %v, want ErrConflict", err)
	}
}

// TestDirDeleteManyStopsAtAnError: DeleteMany on a directory spool syncs
// each directory once, after its removals; when one removal fails, the
// error names the object and every name is said gone exactly when it is
// gone, so spool gc prints no removal that did not happen.
func TestDirDeleteManyStopsAtAnError(t *testing.T) {
	root := t.TempDir()
	d, err := spool.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var names []string
	for _, node := range []string{"n1", "n2", "n3"} {
		for seq := range uint64(20) {
			name := spool.ReportName(node, 1, seq+1)
			if err := d.Put(ctx, name, []byte(name)); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
	}
	stuck := filepath.Join(root, "report", "n2")
	if os.Geteuid() == 0 {
		// root ignores permission bits: a read-only bind mount of the
		// node's directory.
		if err := syscall.Mount(stuck, stuck, "", syscall.MS_BIND, ""); err != nil {
			t.Skipf("cannot bind-mount here: %v", err)
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(stuck, 0); err != nil {
				t.Errorf("unmount %s: %v", stuck, err)
			}
		})
		if err := syscall.Mount("", stuck, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
			t.Skipf("cannot remount read-only: %v", err)
		}
	} else {
		if err := os.Chmod(stuck, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(stuck, 0o755) })
	}
	gone, err := spool.DeleteMany(ctx, d, names)
	if !errors.Is(err, spool.ErrUnavailable) || !strings.Contains(err.Error(), "report/n2/") {
		t.Fatalf("DeleteMany with a read-only node directory: %v, want ErrUnavailable naming an object of n2", err)
	}
	for i, name := range names {
		_, statErr := d.Stat(ctx, name)
		there := statErr == nil
		if gone[i] == there {
			t.Errorf("%s: said gone %v, still there %v", name, gone[i], there)
		}
		if strings.HasPrefix(name, "report/n2/") && !there {
			t.Errorf("%s was removed from a read-only directory", name)
		}
	}
}

// TestFull: a full filesystem is a temporary failure and leaves no temp
// file behind.
func TestFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small filesystem")
	}
	d, err := spool.OpenDir(mountTmpfs(t, "256k"))
	if err != nil {
		t.Fatal(err)
	}
	name := spool.DeclName(1, "run1", "n1")
	wantUnavailable(t, d.Put(t.Context(), name, make([]byte, 1<<20)), name)
	if left := temps(t, d); len(left) != 0 {
		t.Errorf("a failed Put left temp files: %v", left)
	}
	if got := listNames(t, d, ""); len(got) != 0 {
		t.Errorf("a failed Put left objects: %q", got)
	}
}
