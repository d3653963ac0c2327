package spool

import (
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames oldname to newname unless newname exists, in
// which case the error wraps fs.ErrExist.
func renameNoReplace(oldname, newname string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldname, unix.AT_FDCWD, newname, unix.RENAME_NOREPLACE)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}
