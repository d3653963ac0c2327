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
