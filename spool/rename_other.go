//go:build !linux

package spool

// renameNoReplace is only available on Linux; elsewhere a filesystem
// without hard links cannot hold a spool.
func renameNoReplace(oldname, newname string) error { return errNoRenameNoReplace }
