//go:build linux

package spool

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// bothDirs returns src and dst as directory spools, if both are.
func bothDirs(src, dst Spool) (*Dir, *Dir, bool) {
	s, ok := src.(*Dir)
	if !ok {
		return nil, nil, false
	}
	d, ok := dst.(*Dir)
	return s, d, ok
}

// matchDirs plans a sync between two directory spools by walking both
// trees in step, a directory of one beside the same directory of the
// other, instead of listing each whole: no list of every object is kept,
// and each object's size is stat'ed through its open directory, by
// several goroutines at once. An object compared by content
// (AlwaysCompared) is read on both sides as it is met, and equal bytes
// end its part in the sync there; any difference, or anything unusual in
// reading it, leaves it to be compared as any other sync would.
func (p *syncPlan) matchDirs(ctx context.Context, src, dst *Dir, opts SyncOptions) error {
	m := &dirMatch{src: src, dst: dst, opts: opts, sem: make(chan struct{}, max(opts.Workers-1, 0))}
	sfd, err := openDir(unix.AT_FDCWD, src.root)
	if err != nil {
		return src.fail("list", "/", err)
	}
	defer unix.Close(sfd)
	dfd, err := openDir(unix.AT_FDCWD, dst.root)
	if err != nil {
		return dst.fail("list", "/", err)
	}
	defer unix.Close(dfd)
	m.srcWhole, m.dstWhole = readsWhole(sfd), readsWhole(dfd)
	return m.walker().pair(ctx, "", sfd, dfd, p)
}

// dirMatch is the state one matchDirs shares between its goroutines.
type dirMatch struct {
	src, dst *Dir
	opts     SyncOptions
	sem      chan struct{} // a token for each goroutine beyond the first
	// srcWhole and dstWhole say that each side's filesystem reads a
	// regular file whole (see readsWhole).
	srcWhole, dstWhole bool
}

// readsWhole reports whether the filesystem holding the open directory fd
// is one whose read of a regular file returns all that was asked for
// unless the file ends first (or the process is being killed): the local
// filesystems of Linux's own that stampsKept names, whose reads go
// through the page cache. Such a read that returns less than was asked
// has met the end, so readSmall need not read again to be told so: for
// a sync of a spool of 100,000 nodes that is 600,000 system calls. FUSE
// (a FAT or exFAT stick), network and other filesystems may return less
// and are read to the end.
func readsWhole(fd int) bool { return stampsKept(fd) }

// dirWalker is one goroutine's part of a dirMatch, with its buffers.
type dirWalker struct {
	m       *dirMatch
	dirents []byte
	// ents is where read collects a directory's entries before it
	// returns a copy of just their size: appending to a new slice for a
	// directory of 100,000 entries made five times their size in
	// garbage.
	ents       []syncEntry
	srcB, dstB []byte // an object compared by content, from each side
}

func (m *dirMatch) walker() *dirWalker { return &dirWalker{m: m} }

// syncEntry is one name in a directory of either side, or of both.
type syncEntry struct {
	name  string
	dir   bool
	inDst bool
}

// compareEntries orders entries as their objects' names are ordered: a
// directory as its name followed by "/", so "a.x" comes before "a/b".
func compareEntries(a, b syncEntry) int {
	n := min(len(a.name), len(b.name))
	if c := cmp.Compare(a.name[:n], b.name[:n]); c != 0 {
		return c
	}
	return cmp.Compare(a.keyByte(n), b.keyByte(n))
}

// keyByte is the byte at i of the entry's name as sorted: the name's own
// bytes, then "/" for a directory, then -1.
func (e syncEntry) keyByte(i int) int {
	switch {
	case i < len(e.name):
		return int(e.name[i])
	case i == len(e.name) && e.dir:
		return '/'
	}
	return -1
}

// pair plans the objects below directory rel ("" for the top, or a name
// prefix ending in "/"), open as sfd in the source and dfd in the
// destination (-1 where it has no such directory).
func (w *dirWalker) pair(ctx context.Context, rel string, sfd, dfd int, p *syncPlan) error {
	m := w.m
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: list %s: %w", m.src, cmp.Or(rel, "/"), err)
	}
	ents, err := w.read(sfd)
	if err != nil {
		return m.src.fail("list", cmp.Or(rel, "/"), err)
	}
	if dfd >= 0 {
		theirs, err := w.read(dfd)
		if err != nil {
			return m.dst.fail("list", cmp.Or(rel, "/"), err)
		}
		j := 0
		for i := range ents {
			for j < len(theirs) && compareEntries(theirs[j], ents[i]) < 0 {
				j++ // only at the destination: nothing to do
			}
			if j < len(theirs) && compareEntries(theirs[j], ents[i]) == 0 {
				ents[i].inDst = true
				j++
			}
		}
	}
	return w.entries(ctx, rel, sfd, dfd, ents, p)
}

// entriesAtOnce is how many entries of a directory one goroutine takes at
// a time: a large spool is mostly directories of a few objects each
// (report/<nodeid>/, brief/<nodeid>/), or a few directories of many
// (enrol/token/).
const entriesAtOnce = 128

// entries plans the source's entries of directory rel, in parts handled
// by as many goroutines as are free, each part's plan added in order.
func (w *dirWalker) entries(ctx context.Context, rel string, sfd, dfd int, ents []syncEntry, p *syncPlan) error {
	if len(ents) <= entriesAtOnce {
		return w.part(ctx, rel, sfd, dfd, ents, p)
	}
	parts := (len(ents) + entriesAtOnce - 1) / entriesAtOnce
	plans := make([]syncPlan, parts)
	errs := make([]error, parts)
	var next atomic.Int64
	var failed atomic.Bool
	work := func(w *dirWalker) {
		for !failed.Load() {
			k := int(next.Add(1) - 1)
			if k >= parts {
				return
			}
			part := ents[k*entriesAtOnce : min((k+1)*entriesAtOnce, len(ents))]
			if errs[k] = w.part(ctx, rel, sfd, dfd, part, &plans[k]); errs[k] != nil {
				failed.Store(true)
			}
		}
	}
	var wg sync.WaitGroup
more:
	for range parts - 1 {
		select {
		case w.m.sem <- struct{}{}:
			wg.Go(func() {
				defer func() { <-w.m.sem }()
				work(w.m.walker())
			})
		default:
			break more
		}
	}
	work(w)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for k := range plans {
		p.add(&plans[k])
	}
	return nil
}

// part plans some of the entries of directory rel, in order.
func (w *dirWalker) part(ctx context.Context, rel string, sfd, dfd int, ents []syncEntry, p *syncPlan) error {
	m := w.m
	for _, e := range ents {
		if e.dir {
			if err := w.subdir(ctx, rel, sfd, dfd, e, p); err != nil {
				return err
			}
			continue
		}
		name := rel + e.name
		if e.inDst && AlwaysCompared(name) && !m.opts.Check && w.sameContent(sfd, dfd, e.name) {
			p.skipped++
			continue
		}
		size, ok, err := statObject(sfd, e.name)
		if err != nil {
			return m.src.fail("list", name, err)
		}
		if !ok {
			continue // deleted while we listed
		}
		dstSize, inDst := int64(0), e.inDst
		if inDst {
			if dstSize, inDst, err = statObject(dfd, e.name); err != nil {
				return m.dst.fail("list", name, err)
			}
		}
		if inDst {
			p.both(Info{Name: name, Size: size}, dstSize, "", m.opts)
		} else {
			p.srcOnly(Info{Name: name, Size: size})
		}
	}
	return nil
}

// subdir plans the objects below directory e of directory rel.
func (w *dirWalker) subdir(ctx context.Context, rel string, sfd, dfd int, e syncEntry, p *syncPlan) error {
	m := w.m
	name := rel + e.name + "/"
	sub, err := openDir(sfd, e.name)
	switch {
	case absent(err):
		return nil // deleted while we listed
	case err != nil:
		return m.src.fail("list", name, err)
	}
	defer unix.Close(sub)
	subDst := -1
	if e.inDst {
		subDst, err = openDir(dfd, e.name)
		switch {
		case absent(err):
			subDst = -1
		case err != nil:
			return m.dst.fail("list", name, err)
		default:
			defer unix.Close(subDst)
		}
	}
	return w.pair(ctx, name, sub, subDst, p)
}

// read returns the entries of the open directory fd that can hold objects,
// in order: regular files and directories whose names an object's name
// can have, so never a temp file.
func (w *dirWalker) read(fd int) ([]syncEntry, error) {
	if w.dirents == nil {
		w.dirents = make([]byte, 32<<10)
	}
	ents := w.ents[:0]
	defer func() {
		clear(ents) // holds no name past the read
		w.ents = ents[:0]
	}()
	for {
		n, err := unix.Getdents(fd, w.dirents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		// Each record: inode (8 bytes), offset (8), length (2), type (1)
		// and the name, NUL-terminated.
		for rec := w.dirents[:n]; len(rec) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(rec[16:]))
			if reclen < 19 || reclen > len(rec) {
				return nil, fmt.Errorf("directory entry of %d bytes in a read of %d: %w", reclen, len(rec), unix.EIO)
			}
			typ, raw := rec[18], rec[19:reclen]
			rec = rec[reclen:]
			if i := bytes.IndexByte(raw, 0); i >= 0 {
				raw = raw[:i]
			}
			if len(raw) == 0 || raw[0] == '.' {
				continue // ".", "..", temp files: never objects
			}
			name := string(raw)
			if segmentProblem(name) != "" {
				continue
			}
			if typ == unix.DT_UNKNOWN {
				// Some filesystems leave the type to a stat.
				var st unix.Stat_t
				if err := fstatat(fd, name, &st); absent(err) {
					continue
				} else if err != nil {
					return nil, err
				}
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFREG:
					typ = unix.DT_REG
				case unix.S_IFDIR:
					typ = unix.DT_DIR
				}
			}
			if typ == unix.DT_REG || typ == unix.DT_DIR {
				ents = append(ents, syncEntry{name: name, dir: typ == unix.DT_DIR})
			}
		}
	}
	slices.SortFunc(ents, compareEntries)
	return slices.Clone(ents), nil
}

// sameContentMax bounds the objects sameContent reads: those it compares
// (AlwaysCompared) are small, and anything larger is left to compare.
const sameContentMax = 64 << 10

// sameContent reports whether the object name in the open directories sfd
// and dfd has the same bytes on both sides. False means "not shown equal"
// (different, unreadable, too large, gone): the object is then compared
// as any other.
func (w *dirWalker) sameContent(sfd, dfd int, name string) bool {
	if w.srcB == nil {
		w.srcB, w.dstB = make([]byte, sameContentMax+1), make([]byte, sameContentMax+1)
	}
	a, ok := readSmall(sfd, name, w.srcB, w.m.srcWhole)
	if !ok {
		return false
	}
	b, ok := readSmall(dfd, name, w.dstB, w.m.dstWhole)
	return ok && bytes.Equal(a, b)
}

// readSmall reads the file name of directory fd whole into buf, unless it
// does not fit: ok is false then, and for any error. whole says that a
// read returning less than asked has met the end (see readsWhole).
func readSmall(fd int, name string, buf []byte, whole bool) (data []byte, ok bool) {
	// O_NOFOLLOW, O_NONBLOCK: as openObject.
	f, err := openat(fd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, false
	}
	defer unix.Close(f)
	for n := 0; n < len(buf); {
		m, err := unix.Read(f, buf[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, false
		case m == 0:
			return buf[:n], true
		case whole && m < len(buf)-n:
			return buf[:n+m], true
		}
		n += m
	}
	return nil, false
}

// statObject returns the size of the object name in the open directory
// fd, and whether it is one: anything but a regular file is not.
func statObject(fd int, name string) (size int64, ok bool, err error) {
	var st unix.Stat_t
	err = fstatat(fd, name, &st)
	switch {
	case absent(err):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return st.Size, st.Mode&unix.S_IFMT == unix.S_IFREG, nil
}

func fstatat(fd int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(fd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// openDir opens directory name of the open directory fd, not following a
// symlink: List shows none.
func openDir(fd int, name string) (int, error) {
	return openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
}

func openat(fd int, name string, flags int) (int, error) {
	for {
		f, err := unix.Openat(fd, name, flags, 0)
		if err != unix.EINTR {
			return f, err
		}
	}
}

// absent reports whether err says a name is not there (any more), or is
// not what was looked for (a symlink, a file where a directory was).
func absent(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}
