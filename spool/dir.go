package spool

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/workpool"
)

// Dir is a spool kept in a local directory: each object is a regular file
// whose path below the directory is the object's name (see doc.go). It is
// safe for concurrent use, by goroutines and by processes on other machines
// sharing the directory.
type Dir struct {
	root string
	// Seams for tests: which directories List reads, and a filesystem
	// without hard links or without rename that refuses to replace.
	readDir         func(string) ([]fs.DirEntry, error)
	link            func(oldname, newname string) error
	renameNoReplace func(oldname, newname string) error
}

// OpenDir opens the spool in directory dir, which must exist.
func OpenDir(dir string) (*Dir, error) {
	if dir == "" {
		return nil, fault.Usagef("spool directory not given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("spool directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A failure, not a temporary one: nothing makes a directory
		// appear by itself, so a timer retrying would fail forever. A
		// spool on a disk that is not mounted is its empty mount
		// point, which opens, and holds no mesh keys (temporary).
		return nil, fault.WithHint(fmt.Errorf("spool directory %s does not exist", abs),
			"create it with: mkdir -p "+abs+" (or give the path of the spool, or of its disk's mount point)")
	case err != nil:
		return nil, classify(fmt.Errorf("spool directory %s: %w", abs, err), err, abs)
	case !fi.IsDir():
		return nil, fmt.Errorf("spool %s is not a directory", abs)
	}
	return &Dir{root: abs, readDir: readDirEntries, link: os.Link, renameNoReplace: renameNoReplace}, nil
}

// String names the spool in messages: "dir:" and the absolute path.
func (d *Dir) String() string { return "dir:" + d.root }

// Path returns the spool's directory as an absolute path.
func (d *Dir) Path() string { return d.root }

func (d *Dir) file(name string) string { return filepath.Join(d.root, filepath.FromSlash(name)) }

// Put creates object name with data unless it exists; see Spool.Put.
//
// The bytes go to a temp file in the spool's top directory, are synced, and
// the file is then hard-linked under the object's name. link(2) refuses to
// replace an existing name, so of two writers racing for one name exactly
// one wins, and a reader never sees a name before all its bytes are on
// disk. The object's directory is synced so the new name survives a crash.
// Filesystems without hard links get the fallbacks in place.
func (d *Dir) Put(ctx context.Context, name string, data []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: put %s: %w", d, name, err)
	}
	target := d.file(name)
	// Re-putting what is already there is common (spool sync, a retried
	// run): answer it without writing.
	if err := d.compare(name, target, data); !errors.Is(err, errAbsent) {
		if errors.Is(err, ErrConflict) {
			// Through FUSE (FAT, exFAT) a rename under the lock is not
			// atomic to a reader without it: what looked different may
			// be another Put's object half placed. Look again under the
			// lock before calling it a conflict.
			err = d.compareLocked(name, target, data)
		}
		return err
	}
	if err := d.mkdirs(name); err != nil {
		return err
	}
	tmp, err := d.writeTemp(name, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: put %s: %w", d, name, err)
	}
	if err := d.placeIn(name, tmp, target); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Someone else won the race; it is only an error if
			// they wrote different bytes.
			err := d.compare(name, target, data)
			if errors.Is(err, ErrConflict) {
				err = d.compareLocked(name, target, data)
			}
			return err
		}
		return d.fail("put", name, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(target)); err != nil {
		return d.fail("put", name, err)
	}
	return nil
}

// placeIn is place for object name, making its directories again if they
// went away since mkdirs made them: spool gc removes a directory it
// emptied (RemoveEmptyDir).
func (d *Dir) placeIn(name, tmp, target string) error {
	err := d.place(tmp, target)
	if errors.Is(err, fs.ErrNotExist) {
		if err := d.mkdirs(name); err != nil {
			return err
		}
		err = d.place(tmp, target)
	}
	return err
}

// place moves the complete temp file under the object's name, never
// replacing an existing name.
func (d *Dir) place(tmp, target string) error {
	err := d.link(tmp, target)
	if err == nil || errors.Is(err, fs.ErrExist) || !unsupported(err, syscall.EPERM) {
		return err
	}
	// FAT and exFAT, common on the USB sticks spools travel on, have no
	// hard links (EPERM); rename without replacing is just as atomic.
	err = d.renameNoReplace(tmp, target)
	if err == nil || errors.Is(err, fs.ErrExist) || !unsupported(err, syscall.EINVAL) {
		return err
	}
	// Their FUSE drivers, the way to mount them where the kernel has no
	// driver, have no such rename either (the kernel answers EINVAL).
	return d.renameLocked(tmp, target)
}

// unsupported reports whether err says that the filesystem or system
// lacks an operation: ENOSYS, EOPNOTSUPP, or also, the answer particular
// to the operation.
func unsupported(err error, also syscall.Errno) bool {
	return errors.Is(err, also) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.ENOTSUP) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, errNoRenameNoReplace)
}

// renameLocked renames tmp to target unless target exists, on filesystems
// with neither hard links nor rename without replacing. rename(2) replaces
// an existing name, so the check and the rename happen under an exclusive
// flock(2) on the spool's top directory: two Puts on this machine never
// both find a name free. doc.go says what the lock cannot keep out.
func (d *Dir) renameLocked(tmp, target string) error {
	return d.underLock(syscall.LOCK_EX, func() error {
		if _, err := os.Lstat(target); err == nil {
			return &os.LinkError{Op: "rename", Old: tmp, New: target, Err: syscall.EEXIST}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Rename(tmp, target); err != nil {
			return err
		}
		// Through FUSE the renamed file's bytes may not yet read back
		// under its new name from another descriptor; syncing it before
		// the lock goes makes that less likely (compareLocked covers the
		// rest).
		f, err := os.Open(target)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		return err
	})
}

// compareLocked is compare under a shared flock(2) on the spool's top
// directory, the one renameLocked holds exclusively while it places an
// object. Through FUSE (fusefat) the bytes of a file renamed a moment ago
// may read back wrong for a moment more, even synced; a real conflict
// stays one, so a few looks a little apart, not holding the lock between
// them, tell the two apart. Only a Put that found different bytes pays
// for them.
func (d *Dir) compareLocked(name, file string, data []byte) error {
	var err error
	for try := 0; ; try++ {
		if err = d.underLock(syscall.LOCK_SH, func() error { return d.compare(name, file, data) }); !errors.Is(err, ErrConflict) || try == 3 {
			return err
		}
		time.Sleep(time.Duration(try+1) * 15 * time.Millisecond)
	}
}

// underLock runs fn holding a flock(2) of kind how on the spool's top
// directory.
func (d *Dir) underLock(how int, fn func() error) error {
	fd, err := syscall.Open(d.root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: d.root, Err: err}
	}
	defer syscall.Close(fd) // releases the lock
	for {
		err = syscall.Flock(fd, how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "lock", Path: d.root, Err: err}
	}
	return fn()
}

// errNoRenameNoReplace is renameNoReplace's answer where the system has no
// such rename.
var errNoRenameNoReplace = errors.New("rename without replacing is not supported here")

// errAbsent is compare's answer when there is no object to compare with.
var errAbsent = errors.New("absent")

// compare checks an existing object against data: nil if the bytes are the
// same, an error wrapping ErrConflict if not, errAbsent if the name is
// free.
func (d *Dir) compare(name, file string, data []byte) error {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// ENOTDIR: a parent is an object; mkdirs says so.
		return errAbsent
	}
	if err != nil {
		return d.fail("put", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return d.fail("put", name, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("spool %s: %s: %w: the name holds other objects", d, name, ErrConflict)
	}
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(data)) {
		return fmt.Errorf("spool %s: %s: %w", d, name, ErrConflict)
	}
	buf := make([]byte, min(len(data), 64<<10)+1)
	rest := data
	for {
		n, err := f.Read(buf)
		if n > len(rest) || !bytes.Equal(buf[:n], rest[:n]) {
			return fmt.Errorf("spool %s: %s: %w", d, name, ErrConflict)
		}
		rest = rest[n:]
		if err == io.EOF {
			break
		}
		if err != nil {
			return d.fail("put", name, err)
		}
	}
	if len(rest) > 0 {
		return fmt.Errorf("spool %s: %s: %w", d, name, ErrConflict)
	}
	return nil
}

// mkdirs creates the directories above object name, syncing each parent
// whose listing changed so the new directory survives a crash.
func (d *Dir) mkdirs(name string) error {
	parent := path.Dir(name)
	if parent == "." {
		return nil
	}
	if fi, err := os.Stat(d.file(parent)); err == nil && fi.IsDir() {
		return nil
	}
	cur, sofar := d.root, ""
	for seg := range strings.SplitSeq(parent, "/") {
		next := filepath.Join(cur, seg)
		sofar = path.Join(sofar, seg)
		err := os.Mkdir(next, 0o777)
		switch {
		case err == nil:
			if err := atomicfile.SyncDir(cur); err != nil {
				return d.fail("put", name, err)
			}
		case errors.Is(err, fs.ErrExist):
			fi, err := os.Stat(next)
			if err != nil {
				return d.fail("put", name, err)
			}
			if !fi.IsDir() {
				return fmt.Errorf("spool %s: %s: %w: %s is an object, so no name can continue it with /", d, name, ErrConflict, sofar)
			}
		default:
			return d.fail("put", name, err)
		}
		cur = next
	}
	return nil
}

// writeTemp writes data to a new, synced temp file in the top directory and
// returns its path. The file is created read-only (less the umask):
// objects are never modified.
func (d *Dir) writeTemp(name string, data []byte) (string, error) {
	return d.writeTempSync(name, data, true)
}

// writeTempSync is writeTemp that leaves the sync to the caller when sync
// is false (PutMany syncs a whole batch at once).
func (d *Dir) writeTempSync(name string, data []byte, sync bool) (string, error) {
	var f *os.File
	var tmp string
	for {
		tmp = filepath.Join(d.root, fmt.Sprintf("%s%016x", atomicfile.TempPrefix, rand.Uint64()))
		var err error
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", d.fail("put", name, err)
		}
	}
	_, err := f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", d.fail("put", name, err)
	}
	return tmp, nil
}

// Get returns object name's bytes; see Spool.Get.
func (d *Dir) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("spool %s: get %s: %w", d, name, err)
	}
	if max <= 0 {
		max = DefaultMaxObject
	}
	file := d.file(name)
	fd, err := openObject(file)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP):
		// ELOOP: a symlink.
		return nil, d.notFound(name)
	case err != nil:
		return nil, d.fail("get", name, &fs.PathError{Op: "open", Path: file, Err: err})
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, d.fail("get", name, &fs.PathError{Op: "stat", Path: file, Err: err})
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, d.notFound(name)
	}
	if st.Size > max {
		return nil, fmt.Errorf("spool %s: %s: %w (%d bytes, limit %d)", d, name, ErrTooLarge, st.Size, max)
	}
	data := make([]byte, st.Size)
	for n := 0; n < len(data); {
		m, err := syscall.Read(fd, data[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, d.fail("get", name, &fs.PathError{Op: "read", Path: file, Err: err})
		case m == 0:
			return nil, d.fail("get", name, &fs.PathError{Op: "read", Path: file, Err: io.ErrUnexpectedEOF})
		}
		n += m
	}
	return data, nil
}

// openObject opens an object's file for Get, which reads it whole with
// system calls of its own: an os.File costs three more, for the runtime's
// poller, which a regular file never uses. O_NOFOLLOW: List shows regular
// files only, so Get must not follow a symlink to something List would
// not show; O_NONBLOCK: nor wait for a writer on a FIFO left under an
// object's name. What the name holds is checked once it is open.
func openObject(file string) (int, error) {
	for {
		fd, err := syscall.Open(file, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// Stat returns object name's size; see Spool.Stat.
func (d *Dir) Stat(ctx context.Context, name string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("spool %s: stat %s: %w", d, name, err)
	}
	fi, err := d.stat("stat", name)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: name, Size: fi.Size()}, nil
}

// stat lstats the object's file: anything but a regular file is no object.
func (d *Dir) stat(op, name string) (fs.FileInfo, error) {
	fi, err := os.Lstat(d.file(name))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, d.notFound(name)
	}
	if err != nil {
		return nil, d.fail(op, name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, d.notFound(name)
	}
	return fi, nil
}

// Delete removes object name; see Spool.Delete. Directories emptied by it
// stay: removing one could race with a Put about to link into it.
func (d *Dir) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: delete %s: %w", d, name, err)
	}
	dir, err := d.remove(name)
	if err != nil || dir == "" {
		return err
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return d.fail("delete", name, err)
	}
	return nil
}

// remove unlinks object name, unsynced, and returns the directory to sync
// to make the removal durable ("" if there was no such object).
func (d *Dir) remove(name string) (dir string, err error) {
	if _, err := d.stat("delete", name); errors.Is(err, ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	file := d.file(name)
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", d.fail("delete", name, err)
	}
	return filepath.Dir(file), nil
}

// deleteMany removes the named objects as Delete does, several at once,
// and syncs each directory that lost one once, after all its removals,
// rather than once per object: a daily gc removes a day's reports from
// every node's directory. An object is said gone once its directory is
// synced; on an error, the directories of the objects removed so far are
// still synced, and those objects said gone.
func (d *Dir) deleteMany(ctx context.Context, names []string, gone []bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: delete: %w", d, err)
	}
	dirs := make([]string, len(names))
	removeErr := workpool.Run(ctx, len(names), deletesInFlight, func(i int) error {
		dir, err := d.remove(names[i])
		if err != nil {
			return err
		}
		dirs[i] = dir
		gone[i] = dir == "" // nothing of that name: nothing to sync
		return nil
	})
	var toSync []string
	byDir := map[string][]int{}
	for i, dir := range dirs {
		if dir != "" {
			if byDir[dir] == nil {
				toSync = append(toSync, dir)
			}
			byDir[dir] = append(byDir[dir], i)
		}
	}
	// Each directory's sync is a wait on the disk, as each removal was.
	syncErr := workpool.Run(context.WithoutCancel(ctx), len(toSync), deletesInFlight, func(j int) error {
		if err := atomicfile.SyncDir(toSync[j]); err != nil {
			return d.fail("delete", names[byDir[toSync[j]][0]], err)
		}
		for _, i := range byDir[toSync[j]] {
			gone[i] = true
		}
		return nil
	})
	return cmp.Or(removeErr, syncErr)
}

// subdirs reads the one directory prefix names; see Subdirs.
func (d *Dir) subdirs(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("spool %s: list %s: %w", d, prefix, err)
	}
	entries, err := os.ReadDir(d.file(strings.TrimSuffix(prefix, "/")))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, d.fail("list", prefix, err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && ValidName(prefix+e.Name()) == nil {
			dirs = append(dirs, prefix+e.Name()+"/")
		}
	}
	return dirs, nil
}

// List calls fn for each object whose name starts with prefix, in lexical
// order; see Spool.List. Only the directory named by the prefix up to its
// last "/" and the directories below it that match are read, so listing
// one node's reports costs the same in a spool of ten nodes or ten
// thousand.
func (d *Dir) List(ctx context.Context, prefix string, fn func(Info) error) error {
	return d.ListAfter(ctx, prefix, "", fn)
}

// ListNames is List without the sizes: it calls fn with the name of each
// object whose name starts with prefix, in lexical order. A directory
// listing carries no sizes, so List costs a stat of every object; a caller
// that knows objects by name alone (they never change) can skip them.
// An object deleted while it is listed may still be named.
func (d *Dir) ListNames(ctx context.Context, prefix string, fn func(name string) error) error {
	return d.walk(ctx, prefix, func(name string, _ fs.DirEntry) error { return fn(name) })
}

// walk calls fn with the name and directory entry of each object whose
// name starts with prefix, in lexical order.
func (d *Dir) walk(ctx context.Context, prefix string, fn func(string, fs.DirEntry) error) error {
	if err := ValidPrefix(prefix); err != nil {
		return err
	}
	dir, partial := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir, partial = prefix[:i+1], prefix[i+1:]
	}
	return d.list(ctx, dir, partial, fn)
}

// list lists the objects in directory dir (an object-name prefix ending in
// "/", or "" for the top) whose next segment starts with partial.
func (d *Dir) list(ctx context.Context, dir, partial string, fn func(string, fs.DirEntry) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: list %s: %w", d, dir, err)
	}
	ents, err := d.readDir(d.file(dir))
	return d.listRead(ctx, dir, partial, ents, err, fn)
}

// listRead is list with directory dir already read.
func (d *Dir) listRead(ctx context.Context, dir, partial string, ents []fs.DirEntry, err error, fn func(string, fs.DirEntry) error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return d.fail("list", cmp.Or(dir, "/"), err)
	}
	type entry struct {
		key string // the name, plus "/" for a directory
		ent fs.DirEntry
	}
	keep := make([]entry, 0, len(ents))
	var subdirs []string
	for _, e := range ents {
		n := e.Name()
		// Skipped: temp files and anything else starting with a dot
		// (rsync's partial files), names no object can have, and
		// anything but regular files and directories.
		if !strings.HasPrefix(n, partial) || segmentProblem(n) != "" {
			continue
		}
		switch {
		case e.Type().IsRegular():
			keep = append(keep, entry{n, e})
		case e.IsDir():
			keep = append(keep, entry{n + "/", e})
		}
	}
	// Sorting a directory as name+"/" puts "a.x" before "a/b": the
	// order of the full object names.
	slices.SortFunc(keep, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	for _, e := range keep {
		if e.ent.IsDir() {
			subdirs = append(subdirs, d.file(dir+e.key))
		}
	}
	ahead := d.readAhead(subdirs)
	defer ahead.wait()
	k := 0
	for _, e := range keep {
		if !e.ent.IsDir() {
			if err := fn(dir+e.key, e.ent); err != nil {
				return err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("spool %s: list %s: %w", d, dir+e.key, err)
		}
		ents, err := ahead.get(k)
		k++
		if err := d.listRead(ctx, dir+e.key, "", ents, err, fn); err != nil {
			return err
		}
	}
	return nil
}

// readAheadWindow is how many directories list reads ahead of the one it
// is walking. A large spool is mostly directories of a few objects each
// (report/<nodeid>/, brief/<nodeid>/), and reading one is mostly system
// calls, which other CPUs can make while the walk calls fn.
const readAheadWindow = 16

// readAhead reads directories in order, some ahead of the walk, a few at
// once.
type readAhead struct {
	d     *Dir
	paths []string
	res   []chan dirListing
	next  int           // paths[:next] are being read or were read
	sem   chan struct{} // bounds the reads at once
	wg    sync.WaitGroup
}

type dirListing struct {
	ents []fs.DirEntry
	err  error
}

func (d *Dir) readAhead(paths []string) *readAhead {
	r := &readAhead{d: d, paths: paths, res: make([]chan dirListing, len(paths))}
	if len(paths) > 1 {
		r.sem = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	}
	return r
}

// get returns directory k's entries, and starts reading the ones after it.
func (r *readAhead) get(k int) ([]fs.DirEntry, error) {
	if r.sem == nil {
		ents, err := r.d.readDir(r.paths[k])
		return ents, err
	}
	for ; r.next < len(r.paths) && r.next <= k+readAheadWindow; r.next++ {
		ch, path := make(chan dirListing, 1), r.paths[r.next]
		r.res[r.next] = ch
		r.wg.Go(func() {
			r.sem <- struct{}{}
			ents, err := r.d.readDir(path)
			<-r.sem
			ch <- dirListing{ents, err}
		})
	}
	l := <-r.res[k]
	r.res[k] = nil
	return l.ents, l.err
}

// wait waits for the reads started, so that a walk that stops early
// leaves nothing running.
func (r *readAhead) wait() { r.wg.Wait() }

// readDirEntries reads a directory. os.ReadDir opens it as a directory,
// which os.Open does not: a plain open of a directory costs three more
// system calls (the runtime's poller tries and fails to take it), a cost
// paid for every node's directory. Its sorting is cheap beside that.
func readDirEntries(dir string) ([]fs.DirEntry, error) {
	return os.ReadDir(dir)
}

// Temps calls fn with the path and age of every temp file in the spool. A
// temp file is either a Put in progress or what a crashed Put left behind;
// gc removes those older than any Put could take. Temp files live only in
// the top directory.
func (d *Dir) Temps(ctx context.Context, fn func(path string, age time.Duration) error) error {
	ents, err := d.readDir(d.root)
	if err != nil {
		return d.fail("list temp files in", "/", err)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	now := time.Now()
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("spool %s: list temp files: %w", d, err)
		}
		if !atomicfile.IsTemp(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // its Put finished
		}
		if err != nil {
			return d.fail("list temp files in", "/", err)
		}
		if err := fn(filepath.Join(d.root, e.Name()), max(now.Sub(fi.ModTime()), 0)); err != nil {
			return err
		}
	}
	return nil
}

// RemoveEmptyDir removes the directory below the spool that prefix (a
// name ending in "/") names, if it holds nothing: spool gc removes the
// directories it empties, so that readers listing directories no longer
// visit them. A directory that is not empty, or not there, is left as it
// is. A Put into the directory at the same moment makes it again (see
// placeIn).
func (d *Dir) RemoveEmptyDir(ctx context.Context, prefix string) error {
	name, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return fmt.Errorf("spool %s: remove directory %q: not a directory's name (it must end in /)", d, prefix)
	}
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: remove directory %s: %w", d, prefix, err)
	}
	dir := d.file(name)
	err := syscall.Rmdir(dir)
	switch {
	case err == nil:
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST), errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil
	default:
		return d.fail("remove directory", prefix, &fs.PathError{Op: "rmdir", Path: dir, Err: err})
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return d.fail("remove directory", prefix, err)
	}
	return nil
}

// RemoveTemp removes a temp file found by Temps. It refuses any other path,
// so a mistake in gc cannot remove an object.
func (d *Dir) RemoveTemp(file string) error {
	if filepath.Dir(file) != d.root || !atomicfile.IsTemp(filepath.Base(file)) {
		return fmt.Errorf("spool %s: %s is not one of its temp files", d, file)
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.fail("remove temp file", filepath.Base(file), err)
	}
	return nil
}

func (d *Dir) notFound(name string) error {
	return fmt.Errorf("spool %s: %s: %w", d, name, ErrNotFound)
}

// fail wraps an error from the filesystem, naming the spool, the operation
// and the object.
func (d *Dir) fail(op, name string, err error) error {
	return classify(fmt.Errorf("spool %s: %s %s: %w", d, op, name, err), err, d.root)
}

// classify marks errors that trying later may cure — permissions, a
// read-only or full filesystem, a network filesystem gone away — as
// ErrUnavailable and fault.Temporary, with a hint naming the directory.
func classify(wrapped, cause error, root string) error {
	var hint string
	switch {
	case errors.Is(cause, syscall.EROFS):
		hint = "the filesystem holding " + root + " is mounted read-only"
	case errors.Is(cause, syscall.EACCES), errors.Is(cause, syscall.EPERM):
		hint = "check that this user may read and write " + root
	case errors.Is(cause, syscall.ENOSPC), errors.Is(cause, syscall.EDQUOT):
		hint = "free some space on the filesystem holding " + root
	case errors.Is(cause, syscall.ESTALE), errors.Is(cause, syscall.ENOTCONN),
		errors.Is(cause, syscall.ETIMEDOUT), errors.Is(cause, syscall.EHOSTDOWN):
		hint = "check that the filesystem holding " + root + " is mounted and reachable"
	default:
		return wrapped
	}
	return fault.WithHint(fault.New(fault.Temporary, &unavailableError{wrapped}), hint)
}

// unavailableError is an error that also matches ErrUnavailable, without
// adding "spool unavailable" to a message that already says what failed.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string        { return e.err.Error() }
func (e *unavailableError) Unwrap() error        { return e.err }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// ListAfter is List leaving out the names at or before after, without a
// stat of any of them.
func (d *Dir) ListAfter(ctx context.Context, prefix, after string, fn func(Info) error) error {
	return d.walk(ctx, prefix, func(name string, e fs.DirEntry) error {
		if name <= after {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we listed
		}
		if err != nil {
			return d.fail("list", name, err)
		}
		return fn(Info{Name: name, Size: fi.Size(), ModTime: fi.ModTime()})
	})
}
