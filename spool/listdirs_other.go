//go:build !linux

package spool

import "context"

// ListDirs is spool.ListDirs for a directory spool, with no stamps: they
// are only taken on Linux.
func (d *Dir) ListDirs(ctx context.Context, prefix string, known func(dir string, st DirStamp) bool, fn func(DirListing) error) error {
	if err := ValidPrefix(prefix); err != nil {
		return err
	}
	return listDirsByName(ctx, d, prefix, fn)
}
