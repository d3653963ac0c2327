package spool

import (
	"os"
	"syscall"
	"time"
)

// WithoutNoReplace makes d act as on FAT or exFAT mounted through FUSE:
// link(2) is refused (EPERM) and so is rename without replacing (EINVAL),
// so every Put takes the locked rename.
func WithoutNoReplace(d *Dir) {
	d.link = func(oldname, newname string) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
	}
	d.renameNoReplace = func(oldname, newname string) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EINVAL}
	}
}

// SyncfsTrusted reports whether PutMany makes a batch durable with one
// syncfs(2) of d's filesystem instead of an fsync per file.
func SyncfsTrusted(d *Dir) bool { return d.syncfs() == nil }

// S3BatchPuts is how many PUTs of batches one S3 spool has in flight at
// most.
const S3BatchPuts = s3BatchPuts

// SetStampSettle makes ListDirs give the stamps of directories changed
// less than d before a listing, until the test ends.
func SetStampSettle(t interface{ Cleanup(func()) }, d time.Duration) {
	old := stampSettle
	stampSettle = d
	t.Cleanup(func() { stampSettle = old })
}

// SetListInRanges makes S3 listings go page after page (false), as they
// did before ranges, or in ranges (true).
func SetListInRanges(on bool) { listInRanges = on }
