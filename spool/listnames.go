package spool

import (
	"context"
	"fmt"
	"strings"
)

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

// subdirLister is implemented by backends that can name the directories
// below a prefix without listing the objects in them.
type subdirLister interface {
	subdirs(ctx context.Context, prefix string) ([]string, error)
}

// Subdirs returns the directories directly below prefix (which ends in
// "/") that hold objects, each as a prefix ending in "/", in lexical
// order: the runs of a generation below "decl/<gen>/", say. A store
// that can is asked for the directories alone (S3: a listing with a
// delimiter, one request per 1,000 directories however many objects they
// hold; a directory: one directory read, which may also name a directory
// left empty); any other lists every object below prefix.
func Subdirs(ctx context.Context, sp Spool, prefix string) ([]string, error) {
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("spool %s: directories below %q: the prefix must end in /", sp, prefix)
	}
	if err := ValidPrefix(prefix); err != nil {
		return nil, err
	}
	if sl, ok := sp.(subdirLister); ok {
		return sl.subdirs(ctx, prefix)
	}
	var dirs []string
	err := sp.List(ctx, prefix, func(i Info) error {
		if dir, ok := subdirOf(prefix, i.Name); ok && (len(dirs) == 0 || dirs[len(dirs)-1] != dir) {
			dirs = append(dirs, dir)
		}
		return nil
	})
	return dirs, err
}

// subdirOf returns the directory directly below prefix that name is in,
// as a prefix ending in "/", and false if name is directly in prefix.
func subdirOf(prefix, name string) (string, bool) {
	seg, _, deeper := strings.Cut(strings.TrimPrefix(name, prefix), "/")
	if !deeper {
		return "", false
	}
	return prefix + seg + "/", true
}
