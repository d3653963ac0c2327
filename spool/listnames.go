package spool

import "context"

// nameLister is implemented by backends whose listing has no sizes, so
// that List costs a stat of every object (a directory) while names alone
// are cheap.
type nameLister interface {
	ListNames(ctx context.Context, prefix string, fn func(name string) error) error
}

// ListQuick lists like List, except that a backend whose sizes would cost
// a stat of every object leaves them out: Info.Size is then -1. Objects
// never change, so a caller that knows them by name loses nothing; where
// sizes come free (S3) they are kept.
func ListQuick(ctx context.Context, sp Spool, prefix string, fn func(Info) error) error {
	if nl, ok := sp.(nameLister); ok {
		return nl.ListNames(ctx, prefix, func(name string) error { return fn(Info{Name: name, Size: -1}) })
	}
	return sp.List(ctx, prefix, fn)
}

// afterLister is implemented by backends that can start a listing past a
// name without reading what comes before it (S3's StartAfter, a directory
// that skips the stat of each earlier object).
type afterLister interface {
	ListAfter(ctx context.Context, prefix, after string, fn func(Info) error) error
}

// ListAfter lists like List, leaving out the objects whose names sort at
// or before after: a caller that knows the spool up to a name, such as
// the commit it applied, pays only for what is newer. A backend that
// cannot start past a name lists from the start, and the names are left
// out here.
func ListAfter(ctx context.Context, sp Spool, prefix, after string, fn func(Info) error) error {
	if al, ok := sp.(afterLister); ok {
		return al.ListAfter(ctx, prefix, after, fn)
	}
	return sp.List(ctx, prefix, func(i Info) error {
		if i.Name <= after {
			return nil
		}
		return fn(i)
	})
}
