package atomicfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func openDir(t *testing.T, dir string) *os.File {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func temps(t *testing.T, dir string) []string {
	t.Helper()
	out, err := Temps(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stageThree stages new content for two existing files and one new file.
func stageThree(t *testing.T) (string, *Batch) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("old "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := openDir(t, dir)
	b := &Batch{}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := b.Add(d, n, []byte("new "+n), 0o640, 1234, 5678); err != nil {
			t.Fatal(err)
		}
	}
	return dir, b
}

// A batch interrupted after staging (a crash before Commit) leaves every
// target as it was, and the staged files are recognisable temp files.
func TestBatchInterruptedAfterStagingLeavesTargets(t *testing.T) {
	dir, b := stageThree(t)
	if got := mustRead(t, filepath.Join(dir, "a")); got != "old a" {
		t.Errorf("a = %q before commit, want old content", got)
	}
	if got := mustRead(t, filepath.Join(dir, "b")); got != "old b" {
		t.Errorf("b = %q before commit, want old content", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "c")); !os.IsNotExist(err) {
		t.Errorf("c exists before commit: %v", err)
	}
	if n := len(temps(t, dir)); n != 3 {
		t.Errorf("%d temp files after staging, want 3 for gc to find", n)
	}
	b.Abort()
	if n := temps(t, dir); len(n) != 0 {
		t.Errorf("temp files left after Abort: %v", n)
	}
	if got := mustRead(t, filepath.Join(dir, "a")); got != "old a" {
		t.Errorf("a = %q after abort, want old content", got)
	}
	if err := b.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
}

func TestBatchCommitReplacesWithModeAndOwner(t *testing.T) {
	dir, b := stageThree(t)
	touched := b.Touch(openDir(t, dir))
	if b.Len() != 3 {
		t.Errorf("Len = %d, want the 3 staged files", b.Len())
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if touched.Err() != nil {
		t.Errorf("touched directory: %v", touched.Err())
	}
	for _, n := range []string{"a", "b", "c"} {
		p := filepath.Join(dir, n)
		if got := mustRead(t, p); got != "new "+n {
			t.Errorf("%s = %q, want new content", n, got)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o640 || st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("%s: mode %v owner %d:%d, want 0640 1234:5678", n, fi.Mode(), st.Uid, st.Gid)
		}
	}
	if n := temps(t, dir); len(n) != 0 {
		t.Errorf("temp files left after Commit: %v", n)
	}
}

// Set-id bits survive staging: the owner is set before the mode because
// chown clears them.
func TestBatchKeepsSetIDBits(t *testing.T) {
	dir := t.TempDir()
	b := &Batch{}
	if _, err := b.Add(openDir(t, dir), "tool", []byte("x"), 0o755|os.ModeSetuid|os.ModeSetgid, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "tool"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != os.ModeSetuid|os.ModeSetgid {
		t.Errorf("mode %v lost its set-id bits", fi.Mode())
	}
}

// A reader running while the batch commits sees the whole old content or
// the whole new content of each file, never a mix.
func TestBatchReaderSeesOldOrNew(t *testing.T) {
	dir := t.TempDir()
	oldData := bytes.Repeat([]byte("o"), 1<<20)
	newData := bytes.Repeat([]byte("n"), 1<<20+17)
	const n = 8
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))), oldData, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var bad atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			for i := range n {
				got, err := os.ReadFile(filepath.Join(dir, string(rune('a'+i))))
				if err != nil {
					bad.Store(err.Error())
					return
				}
				if !bytes.Equal(got, oldData) && !bytes.Equal(got, newData) {
					bad.Store(fmt.Sprintf("a reader saw %d bytes that are neither the old nor the new content", len(got)))
					return
				}
			}
		}
	})
	d := openDir(t, dir)
	b := &Batch{}
	for i := range n {
		if _, err := b.Add(d, string(rune('a'+i)), newData, 0o644, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	for i := range n {
		if got := mustRead(t, filepath.Join(dir, string(rune('a'+i)))); got != string(newData) {
			t.Fatalf("file %d does not hold the new content after Commit", i)
		}
	}
}

// One entry whose rename cannot happen fails alone: the others are
// replaced and no temp file is left.
func TestBatchRenameFailureIsPerEntry(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "busy", "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := openDir(t, dir)
	b := &Batch{}
	bad, err := b.Add(d, "busy", []byte("x"), 0o644, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	good, err := b.Add(d, "fine", []byte("y"), 0o644, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err == nil {
		t.Fatal("Commit over a non-empty directory succeeded")
	}
	if bad.Err() == nil || good.Err() != nil {
		t.Errorf("entry errors: busy=%v fine=%v; want only busy to fail", bad.Err(), good.Err())
	}
	if got := mustRead(t, filepath.Join(dir, "fine")); got != "y" {
		t.Errorf("fine = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "busy")); err != nil || !fi.IsDir() {
		t.Errorf("busy is no longer the directory: %v", err)
	}
	if n := temps(t, dir); len(n) != 0 {
		t.Errorf("temp files left: %v", n)
	}
}

// When syncfs fails, Commit falls back to fsyncing each staged file and
// still replaces the targets.
func TestBatchFallsBackToFsync(t *testing.T) {
	saved := syncfs
	syncfs = func(int) error { return unix.EIO }
	t.Cleanup(func() { syncfs = saved })
	dir, b := stageThree(t)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, filepath.Join(dir, "c")); got != "new c" {
		t.Errorf("c = %q", got)
	}
}

func TestBatchRefusesPathNames(t *testing.T) {
	d := openDir(t, t.TempDir())
	for _, name := range []string{"", ".", "..", "a/b", "../x"} {
		b := &Batch{}
		if _, err := b.Add(d, name, nil, 0o644, -1, -1); err == nil {
			t.Errorf("Add(%q) succeeded", name)
		}
	}
}

func TestTempNames(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	for _, name := range []string{"motd", "a-b", long} {
		tmp := TempName(name)
		if !IsTemp(tmp) || !IsTempOf(tmp, name) {
			t.Errorf("TempName(%.20q) = %.40q: not recognised as its temp", name, tmp)
		}
		if len(tmp) > 255 {
			t.Errorf("TempName(%.20q) is %d bytes, over NAME_MAX", name, len(tmp))
		}
	}
	for _, tc := range []struct{ entry, name string }{
		{".muster-tmp-motd-0123456789abcdef", "mot"},
		{".muster-tmp-motd-0123456789abcdef", "motd.d"},
		{".muster-tmp-motd-0123456789abcde", "motd"},
		{".muster-tmp-motd-0123456789abcdeF", "motd"},
		{".muster-tmp-motd-0123456789abcdef0", "motd"},
		{"muster-tmp-motd-0123456789abcdef", "motd"},
		{".muster-tmp-motd-x-0123456789abcdef", "motd"},
	} {
		if IsTempOf(tc.entry, tc.name) {
			t.Errorf("IsTempOf(%q, %q) is true", tc.entry, tc.name)
		}
	}
}

// A staged file dropped before Commit (its new content failed a check)
// leaves its target as it was and no temp file, while the rest of the
// batch is committed.
func TestBatchDropKeepsTarget(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("old "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := openDir(t, dir)
	b := &Batch{}
	ea, err := b.Add(d, "a", []byte("new a"), 0o644, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Add(d, "b", []byte("new b"), 0o644, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	staged := filepath.Join(dir, ea.TempName())
	if got := mustRead(t, staged); got != "new a" {
		t.Fatalf("staged file %s holds %q", staged, got)
	}
	b.Drop(ea)
	if _, err := os.Lstat(staged); !os.IsNotExist(err) {
		t.Errorf("dropped temp file %s still there: %v", staged, err)
	}
	if b.Len() != 1 {
		t.Errorf("Len = %d after a drop, want 1", b.Len())
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if ea.Err() == nil {
		t.Error("a dropped entry reports no error")
	}
	if eb.Err() != nil {
		t.Errorf("the other entry: %v", eb.Err())
	}
	if got := mustRead(t, filepath.Join(dir, "a")); got != "old a" {
		t.Errorf("a = %q after its entry was dropped, want the old content", got)
	}
	if got := mustRead(t, filepath.Join(dir, "b")); got != "new b" {
		t.Errorf("b = %q, want the new content", got)
	}
	if n := temps(t, dir); len(n) != 0 {
		t.Errorf("temp files left: %v", n)
	}
}
