package spool

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// readSmall reads a file whole, or says it does not fit, whether or not
// it may take a short read for the end; and a short read is taken for
// the end only on a filesystem that reads files whole.
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	fd, err := openDir(unix.AT_FDCWD, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const room = 64
	for _, size := range []int{0, 1, 37, room - 1, room} {
		data := bytes.Repeat([]byte{'x'}, size)
		name := "f"
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, whole := range []bool{false, true} {
			got, ok := readSmall(fd, name, make([]byte, room), whole)
			fits := size < room // room-1 bytes at most, so that a larger file shows
			if ok != fits || ok && !bytes.Equal(got, data) {
				t.Errorf("%d bytes, whole %v: read %d bytes, ok %v; want ok %v", size, whole, len(got), ok, fits)
			}
		}
	}
	if _, ok := readSmall(fd, "missing", make([]byte, room), true); ok {
		t.Error("a missing file read as equal content")
	}
	// A local filesystem of Linux's own is taken to read files whole.
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) == nil && !readsWhole(fd) && (uint32(st.Type) == unix.EXT4_SUPER_MAGIC || uint32(st.Type) == unix.TMPFS_MAGIC) {
		t.Errorf("%s (filesystem %#x) is not taken to read whole", dir, st.Type)
	}
}
