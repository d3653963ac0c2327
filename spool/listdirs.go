package spool

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A DirStamp is the state of one directory of a directory spool, taken
// from the filesystem: its device, inode and change time. Adding,
// removing or renaming an entry changes a directory's change time, and so
// does setting its modification time back (as rsync -a and cp -p do after
// copying into it); no program can set the change time itself. So a
// directory whose stamp is the one an earlier listing recorded holds the
// objects that listing found.
//
// The zero DirStamp means "read the directory next time": ListDirs gives
// it where a stamp would not show a change for certain (see ListDirs).
type DirStamp struct {
	Dev, Ino uint64
	Ctime    int64 // change time, Unix nanoseconds
}

// IsZero reports whether st is the zero stamp.
func (st DirStamp) IsZero() bool { return st == DirStamp{} }

// DirListing is what ListDirs found in one directory below its prefix.
type DirListing struct {
	// Dir is the directory as an object-name prefix, such as
	// "report/<node id>/".
	Dir string
	// Stamp is the directory's state before it was read; zero when it
	// cannot be trusted to show a change (see ListDirs).
	Stamp DirStamp
	// Known says that known(Dir, Stamp) held, so the directory was not
	// read and Names is nil.
	Known bool
	// Names are the objects directly in the directory, in lexical order.
	Names []string
	// Sizes are the objects' sizes, where the backend lists them without
	// a stat of each (S3), as ListQuick does; otherwise nil.
	Sizes []int64
}

// StampSettle is how long a directory must have been left unchanged
// before its stamp is given. A change time is taken from a clock that
// ticks from every few milliseconds to once a second (ext4 with small
// inodes), so a directory changed in the tick in which it was stat'ed
// could change again within that tick and keep its stamp; one older than
// any tick cannot.
const StampSettle = 2 * time.Second

// stampSettle is StampSettle, which the package's tests shorten.
var stampSettle = StampSettle

// dirLister is implemented by backends whose directories carry stamps.
type dirLister interface {
	ListDirs(ctx context.Context, prefix string, known func(dir string, st DirStamp) bool, fn func(DirListing) error) error
}

// ListDirs lists the objects of a spool laid out in directories below
// prefix (which ends in "/"), such as report/<node id>/<report>: it calls
// fn once for each directory directly below prefix that holds objects, in
// lexical order, with the names of the objects directly in it. Objects
// elsewhere below prefix (directly in it, or deeper) are not listed.
//
// A directory spool on a local filesystem that keeps change times (ext2
// to ext4, XFS, Btrfs, F2FS, tmpfs) also gives each directory's stamp
// before reading it, and does not read a directory for which known(dir,
// stamp) returns true: fn is called with Known set instead, and the
// caller uses what it recorded with that stamp. known may be called from
// several goroutines at once. A directory changed less than StampSettle
// before the listing started, or on any other filesystem (FAT and exFAT,
// whose times other systems may leave alone; network and FUSE
// filesystems; overlays), gets the zero stamp and is always read, as is
// every directory of any other backend.
func ListDirs(ctx context.Context, sp Spool, prefix string, known func(dir string, st DirStamp) bool, fn func(DirListing) error) error {
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("spool %s: list directories below %q: the prefix must end in /", sp, prefix)
	}
	if dl, ok := sp.(dirLister); ok {
		return dl.ListDirs(ctx, prefix, known, fn)
	}
	return listDirsByName(ctx, sp, prefix, fn)
}

// listDirsByName is ListDirs from a listing of names, with no stamps.
func listDirsByName(ctx context.Context, sp Spool, prefix string, fn func(DirListing) error) error {
	var cur DirListing
	flush := func() error {
		if len(cur.Names) == 0 {
			return nil
		}
		if len(cur.Sizes) != len(cur.Names) {
			cur.Sizes = nil
		}
		err := fn(cur)
		cur = DirListing{}
		return err
	}
	err := ListQuick(ctx, sp, prefix, func(i Info) error {
		rest := i.Name[len(prefix):]
		slash := strings.IndexByte(rest, '/')
		if slash <= 0 || strings.IndexByte(rest[slash+1:], '/') >= 0 {
			return nil
		}
		if dir := i.Name[:len(prefix)+slash+1]; dir != cur.Dir {
			if err := flush(); err != nil {
				return err
			}
			cur.Dir = dir
		}
		cur.Names = append(cur.Names, i.Name)
		if i.Size >= 0 {
			cur.Sizes = append(cur.Sizes, i.Size)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
