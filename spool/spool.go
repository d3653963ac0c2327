package spool

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/fault"
)

// Spool is a store of immutable, uniquely named objects.
//
// Every backend gives the same guarantees: Put is create-if-absent and
// atomic (a reader sees the whole object or nothing); putting an existing
// name with the same bytes is a no-op, with different bytes ErrConflict;
// List never returns temp files or partial objects. Names follow the rules
// of ValidName, and no object's name followed by "/" starts another
// object's name, so that every name maps to a file (see doc.go). The
// conformance suite in spool/spooltest checks every backend against these
// rules.
type Spool interface {
	// Put creates the object name with data unless it exists. If it exists
	// with identical bytes, Put returns nil; with different bytes (or the
	// name is taken as a prefix of other objects' names), an error wrapping
	// ErrConflict.
	Put(ctx context.Context, name string, data []byte) error
	// Get returns the object's bytes, or an error wrapping ErrNotFound.
	// Objects larger than max bytes are refused with ErrTooLarge (max <= 0
	// means DefaultMaxObject).
	Get(ctx context.Context, name string, max int64) ([]byte, error)
	// Stat returns the object's size, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, name string) (Info, error)
	// List calls fn for every object whose name starts with prefix, in
	// lexical (bytewise) order of name. A prefix no valid name can start
	// with is refused with ErrBadName. If fn returns an error, List stops and
	// returns it.
	List(ctx context.Context, prefix string, fn func(Info) error) error
	// Delete removes an object (only gc uses it). Deleting a missing
	// object is not an error.
	Delete(ctx context.Context, name string) error
	// String names the spool for messages, such as "dir:/srv/spool".
	String() string
}

// Info describes one object.
type Info struct {
	Name string
	Size int64
	// ETag is the store's tag of the object's bytes as its listing gives
	// it (S3's ETag), empty where the backend keeps none (a directory).
	// An object's name and bytes never change, so a listing that shows
	// a name with the tag it had before shows the object seen before: a
	// caller that kept what it read then need not read it again. A tag
	// is the store's word, not a digest to verify against.
	ETag string
	// ModTime is when the store recorded the object, as List gives it
	// (S3's LastModified, a file's modification time); zero where the
	// listing does not say (ListQuick on a directory).
	ModTime time.Time
}

// DefaultMaxObject bounds Get when the caller gives no limit.
const DefaultMaxObject = 64 << 20

var (
	// ErrNotFound: no object has that name.
	ErrNotFound = errors.New("object not found")
	// ErrConflict: an object with that name exists with different bytes.
	ErrConflict = errors.New("object exists with different content")
	// ErrTooLarge: the object exceeds the size the caller accepts.
	ErrTooLarge = errors.New("object too large")
	// ErrBadName: the name breaks the naming rules (see doc.go).
	ErrBadName = errors.New("invalid object name")
	// ErrUnavailable: the spool cannot be reached or written right now;
	// trying later may work.
	ErrUnavailable = errors.New("spool unavailable")
)

// Absolute returns location with a directory made absolute, so that it
// names the same spool from any working directory: a mesh or host config
// stores it, and commands run from elsewhere read it. Other locations are
// returned as they are.
func Absolute(location string) (string, error) {
	dir, isDir := strings.CutPrefix(location, "dir:")
	if !isDir && strings.Contains(location, "://") || location == "" {
		return location, nil
	}
	if !isDir {
		dir = location
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fault.Usagef("spool %s: %v", location, err)
	}
	if isDir {
		return "dir:" + abs, nil
	}
	return abs, nil
}

// Open opens a spool from a location: a directory path, "dir:PATH",
// "file://PATH", or "s3://bucket/prefix?endpoint=host:port&region=R&tls=false&timeout=1m"
// (see ParseS3Location). A location that is not understood is a usage
// error.
func Open(location string) (Spool, error) {
	if location == "" {
		return nil, fault.Usagef("no spool given: pass --spool or set MUSTER_SPOOL")
	}
	var dir string
	switch {
	case strings.HasPrefix(location, "s3://"):
		cfg, err := ParseS3Location(location)
		if err != nil {
			return nil, err
		}
		s, err := OpenS3(cfg)
		if err != nil {
			return nil, err // not s: a nil *S3 in a Spool is not a nil Spool
		}
		return s, nil
	case strings.HasPrefix(location, "file://"):
		u, err := url.Parse(location)
		if err != nil {
			return nil, fault.Usagef("spool %s: %v", location, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fault.Usagef("spool %s: file URL names host %q (want file:///path)", location, u.Host)
		}
		dir = u.Path
	case strings.HasPrefix(location, "dir:"):
		dir = strings.TrimPrefix(location, "dir:")
	default:
		if i := strings.Index(location, "://"); i > 0 {
			return nil, fault.Usagef("spool %s: unknown scheme %q (want a directory or s3://)", location, location[:i])
		}
		dir = location
	}
	if dir == "" {
		return nil, fault.Usagef("spool %s: no directory given", location)
	}
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err // not d: a nil *Dir in a Spool is not a nil Spool
	}
	return d, nil
}
