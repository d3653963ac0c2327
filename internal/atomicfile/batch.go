package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Batch replaces many files with the crash safety of WriteFile but without
// paying one fsync per file. Add stages each new content under a temp name
// beside its target (write, fchown, fchmod, close); Commit then makes every
// staged file durable with one syncfs(2) per filesystem, renames each over
// its target, and fsyncs each touched directory once. A reader, or a crash at
// any point, sees every target with its old content or its new one, never a
// mix; a crash before the renames leaves temp files named by TempName,
// which the caller's next run removes (see resource.System.SweepTemps). syncfs also flushes what other programs wrote to the same
// filesystem, so its cost depends on them; for many files it is still far
// cheaper than an fsync each.
//
// Directories are passed as open *os.File handles so that the caller decides
// how they were reached (resource opens them without following symlinks);
// names are single path components inside them. A Batch is not safe for
// concurrent use.
type Batch struct {
	entries []*Entry
	done    bool
}

// Entry is one file staged in a Batch, or one directory touched beside it.
type Entry struct {
	dir  *os.File
	name string
	temp string // "" for a touched directory
	err  error
}

// Err reports why this entry's target was not replaced durably, or nil
// once Commit has renamed it and synced its directory.
func (e *Entry) Err() error { return e.err }

func (e *Entry) path() string { return filepath.Join(e.dir.Name(), e.name) }

// Add stages data as the next content of name in dir, with mode perm and
// owner uid:gid (-1 leaves that id as the creating process's). Nothing is
// visible under name until Commit.
func (b *Batch) Add(dir *os.File, name string, data []byte, perm fs.FileMode, uid, gid int) (*Entry, error) {
	if b.done {
		return nil, errors.New("batch already committed")
	}
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("stage %q in %s: not a single file name", name, dir.Name())
	}
	dfd := int(dir.Fd())
	e := &Entry{dir: dir, name: name}
	var fd int
	var err error
	for range 16 {
		e.temp = TempName(name)
		fd, err = unix.Openat(dfd, e.temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", e.path(), err)
	}
	err = writeAll(fd, data)
	if err == nil && (uid >= 0 || gid >= 0) {
		// Owner before mode: chown clears the set-id bits.
		err = unix.Fchown(fd, uid, gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, UnixMode(perm))
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dfd, e.temp, 0)
		return nil, fmt.Errorf("stage %s: %w", e.path(), err)
	}
	b.entries = append(b.entries, e)
	return e, nil
}

// TempName is the name under which Add staged the entry's content in its
// directory, until Commit renames it; "" for a touched directory or a
// dropped entry.
func (e *Entry) TempName() string { return e.temp }

// errDropped is the Err of an entry taken out of its batch.
var errDropped = errors.New("dropped from the batch; the target was left as it was")

// Drop takes a staged file out of the batch before Commit and removes its
// temp file: its target stays as it was, and the entry's Err says so.
func (b *Batch) Drop(e *Entry) {
	if b.done || e.temp == "" {
		return
	}
	unix.Unlinkat(int(e.dir.Fd()), e.temp, 0)
	e.temp, e.err = "", errDropped
	b.entries = slices.DeleteFunc(b.entries, func(x *Entry) bool { return x == e })
}

// Touch records that the caller changed something in dir beside the batch
// (removed or renamed an entry, created a directory, changed an inode's
// mode or owner). Commit makes those changes durable too: dir's filesystem
// is synced and dir itself fsynced. The returned entry's Err says whether
// that worked.
func (b *Batch) Touch(dir *os.File) *Entry {
	e := &Entry{dir: dir}
	b.entries = append(b.entries, e)
	return e
}

// Len is the number of staged files.
func (b *Batch) Len() int {
	n := 0
	for _, e := range b.entries {
		if e.temp != "" {
			n++
		}
	}
	return n
}

// Commit syncs, renames and syncs directories as described on Batch. It
// returns every entry's error joined; Entry.Err tells them apart. An entry
// whose rename failed leaves its target untouched and its temp file removed.
func (b *Batch) Commit() error {
	if b.done {
		return errors.New("batch already committed")
	}
	b.done = true
	if len(b.entries) == 0 {
		return nil
	}
	type dirKey struct{ dev, ino uint64 }
	keys := make(map[*os.File]dirKey)
	for _, e := range b.entries {
		if _, ok := keys[e.dir]; ok {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(e.dir.Fd()), &st); err != nil {
			e.err = fmt.Errorf("sync directory %s: %w", e.dir.Name(), err)
			continue
		}
		keys[e.dir] = dirKey{st.Dev, st.Ino}
	}

	// One syncfs per filesystem makes every staged file's data and inode
	// durable before any rename can expose it.
	failed := map[uint64]bool{}
	for d, k := range keys {
		if _, done := failed[k.dev]; !done {
			failed[k.dev] = syncfs(int(d.Fd())) != nil
		}
	}
	for _, e := range b.entries {
		if e.err == nil && keys[e.dir] == (dirKey{}) {
			e.err = fmt.Errorf("sync directory %s: cannot stat it", e.dir.Name())
		}
		// Where syncfs failed, fall back to fsyncing each staged file,
		// which also names the file that cannot be written.
		if e.err == nil && e.temp != "" && failed[keys[e.dir].dev] {
			if err := fsyncAt(e.dir, e.temp); err != nil {
				e.err = fmt.Errorf("sync %s: %w", e.path(), err)
			}
		}
	}

	// Renames, then one fsync per directory so the renames are durable.
	dirs := map[dirKey]*os.File{}
	for _, e := range b.entries {
		if e.temp != "" {
			dfd := int(e.dir.Fd())
			if e.err == nil {
				if err := unix.Renameat(dfd, e.temp, dfd, e.name); err != nil {
					e.err = fmt.Errorf("rename %s: %w", e.path(), err)
				}
			}
			if e.err != nil {
				unix.Unlinkat(dfd, e.temp, 0)
			}
		}
		if e.err == nil {
			dirs[keys[e.dir]] = e.dir
		}
	}
	dirErr := map[dirKey]error{}
	for k, d := range dirs {
		if err := unix.Fsync(int(d.Fd())); err != nil && err != unix.EINVAL {
			dirErr[k] = fmt.Errorf("sync directory %s: %w", d.Name(), err)
		}
	}
	var errs []error
	for _, e := range b.entries {
		if e.err == nil {
			e.err = dirErr[keys[e.dir]]
		}
		if e.err != nil {
			errs = append(errs, e.err)
		}
	}
	return errors.Join(errs...)
}

// Abort removes every staged temp file; targets stay as they were.
func (b *Batch) Abort() {
	if b.done {
		return
	}
	b.done = true
	for _, e := range b.entries {
		if e.temp != "" {
			unix.Unlinkat(int(e.dir.Fd()), e.temp, 0)
		}
		if e.err == nil {
			e.err = errors.New("batch aborted")
		}
	}
}

// syncfs is a variable so a test can make it fail and exercise the fallback.
var syncfs = unix.Syncfs

func fsyncAt(dir *os.File, name string) error {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Fsync(fd)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// TempName returns a fresh temp name for a new version of name in the same
// directory: TempPrefix, name cut to 200 bytes so that the temp name stays
// within NAME_MAX, a dash and 16 random hex digits.
func TempName(name string) string {
	return fmt.Sprintf("%s%s-%016x", TempPrefix, tempStem(name), rand.Uint64())
}

func tempStem(name string) string {
	if len(name) > 200 {
		return name[:200]
	}
	return name
}

// IsTempOf reports whether entry is a name TempName gives for name.
func IsTempOf(entry, name string) bool {
	rest, ok := strings.CutPrefix(entry, TempPrefix+tempStem(name)+"-")
	if !ok || len(rest) != 16 {
		return false
	}
	for _, c := range []byte(rest) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// UnixMode converts a FileMode's permission and set-id bits to chmod(2)'s.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}
