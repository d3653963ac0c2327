//go:build !linux

package spool

import "context"

// bothDirs reports that two directory spools are synced as any others:
// walking both in step is only done on Linux.
func bothDirs(src, dst Spool) (*Dir, *Dir, bool) { return nil, nil, false }

// matchDirs is matchListed where the walk in step is not done.
func (p *syncPlan) matchDirs(ctx context.Context, src, dst *Dir, opts SyncOptions) error {
	return p.matchListed(ctx, src, dst, opts)
}
