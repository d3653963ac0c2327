//go:build !linux

package spool

// renameNoReplace is only available on Linux; elsewhere a filesystem
// without hard links gets the locked rename (Dir.renameLocked).
func renameNoReplace(oldname, newname string) error { return errNoRenameNoReplace }
