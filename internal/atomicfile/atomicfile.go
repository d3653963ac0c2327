// Package atomicfile is the one place muster replaces a file: a reader sees
// the old content or the new, never a mix, and a crash at any point leaves
// one of the two in place plus at most a temp file that gc removes.
//
// The recipe: create a temp file in the same directory, write, chmod, fsync,
// close, rename over the target, fsync the directory; on any error remove
// the temp file.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the name of every temp file this package creates, so
// that listings can skip them and gc can find them.
const TempPrefix = ".muster-tmp-"

// IsTemp reports whether a base name is one of our temp files.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// Temps lists the names of the temp files in dir that are regular files.
func Temps(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if IsTemp(e.Name()) && e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// WriteFile atomically replaces path with data and mode perm.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return replace(path, data, perm, true)
}

// WriteCache replaces path with data and mode perm as WriteFile does, but
// syncs nothing: for caches, which a reader checks whole and treats as a
// miss when a crash tore them, so a sync on every change would buy
// nothing. A reader still never sees a mix of old and new.
func WriteCache(path string, data []byte, perm fs.FileMode) error {
	return replace(path, data, perm, false)
}

func replace(path string, data []byte, perm fs.FileMode, durable bool) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+base+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// CreateExclusive creates path with data and mode perm, failing with an
// error that wraps fs.ErrExist if it exists. Used for secrets: it never
// replaces a key. The file is written under a temp name and linked into
// place, so a crash never leaves a truncated key under the real name.
func CreateExclusive(path string, data []byte, perm fs.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+base+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists: %w", path, fs.ErrExist)
		}
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that renames and links in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
