//go:build linux

package spool

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/muster-tool/muster/internal/workpool"
)

// ListDirs is spool.ListDirs for a directory spool: the directory named by
// prefix is read once, each directory in it is stat'ed through it, and
// only those known does not know are read, by several goroutines at once.
// Each directory is stat'ed before it is read, so a change made while it
// is read shows in its stamp the next time.
func (d *Dir) ListDirs(ctx context.Context, prefix string, known func(dir string, st DirStamp) bool, fn func(DirListing) error) error {
	if err := ValidPrefix(prefix); err != nil {
		return err
	}
	// A change made after this moment, however coarse the clock that
	// stamps it, gives a change time no earlier than start less a tick.
	start := time.Now().UnixNano()
	fd, err := openDir(unix.AT_FDCWD, d.file(strings.TrimSuffix(prefix, "/")))
	if absent(err) {
		return nil
	}
	if err != nil {
		return d.fail("list", prefix, err)
	}
	defer unix.Close(fd)
	kept := stampsKept(fd)
	top := dirWalkers.Get().(*dirWalker)
	ents, err := top.read(fd)
	dirWalkers.Put(top)
	if err != nil {
		return d.fail("list", prefix, err)
	}
	dirs := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.dir {
			dirs = append(dirs, e.name)
		}
	}
	workers := max(2, runtime.GOMAXPROCS(0))
	// Every directory is stat'ed first: known may wait for what the
	// caller is still loading (a cache), and the stats need none of it.
	stamps := make([]stamped, len(dirs))
	err = workpool.Run(ctx, len(dirs), workers, func(k int) error {
		var err error
		stamps[k], err = d.stampDir(fd, prefix, dirs[k], kept, start)
		return err
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	// Then in batches, so that fn sees the directories in order while
	// the next batch is not yet started: those known does not know are
	// read, a few system calls each, which other CPUs can make meanwhile.
	const batch = 256
	res := make([]DirListing, batch)
	for i := 0; i < len(dirs); i += batch {
		part := dirs[i:min(i+batch, len(dirs))]
		err := workpool.Run(ctx, len(part), workers, func(k int) error {
			var err error
			res[k], err = d.listDir(fd, prefix, part[k], stamps[i+k], known)
			return err
		})
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return err
		}
		for k := range part {
			if res[k].Known || len(res[k].Names) > 0 {
				if err := fn(res[k]); err != nil {
					return err
				}
			}
			res[k] = DirListing{}
		}
	}
	return nil
}

// stamped is a directory's stamp, if it is one.
type stamped struct {
	st  DirStamp
	dir bool
}

// stampDir stats directory name of the open directory fd (prefix's), which
// ListDirs started listing at start (Unix nanoseconds).
func (d *Dir) stampDir(fd int, prefix, name string, kept bool, start int64) (stamped, error) {
	var st unix.Stat_t
	if err := fstatat(fd, name, &st); absent(err) {
		return stamped{}, nil
	} else if err != nil {
		return stamped{}, d.fail("list", prefix+name+"/", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return stamped{}, nil
	}
	if ctime := st.Ctim.Nano(); kept && start-ctime >= int64(stampSettle) {
		return stamped{DirStamp{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Ctime: ctime}, true}, nil
	}
	return stamped{dir: true}, nil
}

// listDir lists directory name of the open directory fd (prefix's), stat'ed
// before as s.
func (d *Dir) listDir(fd int, prefix, name string, s stamped, known func(string, DirStamp) bool) (DirListing, error) {
	l := DirListing{Dir: prefix + name + "/", Stamp: s.st}
	if !s.dir {
		return l, nil
	}
	if !s.st.IsZero() && known(l.Dir, s.st) {
		l.Known = true
		return l, nil
	}
	sub, err := openDir(fd, name)
	if absent(err) {
		return l, nil
	}
	if err != nil {
		return l, d.fail("list", l.Dir, err)
	}
	defer unix.Close(sub)
	w := dirWalkers.Get().(*dirWalker)
	defer dirWalkers.Put(w)
	ents, err := w.read(sub)
	if err != nil {
		return l, d.fail("list", l.Dir, err)
	}
	for _, e := range ents {
		if !e.dir {
			l.Names = append(l.Names, l.Dir+e.name)
		}
	}
	return l, nil
}

// dirWalkers hold the buffers directories are read into.
var dirWalkers = sync.Pool{New: func() any { return &dirWalker{} }}

// stampsKept reports whether the filesystem holding the open directory fd
// is one whose directories' change times show every change to them: a
// local filesystem of Linux's own. FAT and exFAT keep no change time (the
// kernel gives the creation time) and sticks written by other systems may
// not update the modification time; network filesystems cache
// attributes; FUSE drivers give what they like; an overlay shows the upper
// directory's times.
func stampsKept(fd int) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}
