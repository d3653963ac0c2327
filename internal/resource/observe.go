package resource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// State is what Observe read of one resource.
type State struct {
	// Type is what is at a path: File, Directory, Symlink, or "fifo",
	// "socket", "device" for things muster does not manage.
	Type Kind
	// Mode holds the permission and set-id bits, as chmod(2) takes them.
	Mode uint32
	// Exists: something is at the path, the package is installed. (The
	// flags are kept beside Mode, where each does not take a word of its
	// own: a run holds a State for every resource.)
	Exists bool
	// Stale: the init system runs an older definition of the service
	// than its unit files hold; read only where units can run.
	Stale bool
	// sameContent: the file's content equals the declared content
	// (compared while hashing, so no declared digest is needed).
	sameContent bool
	// read: a file's content was read (not vouched for by a Fingerprint).
	read bool
	UID  int
	GID  int
	// Size and Digest ("sha256:<hex>") of a file's content. Digest is
	// empty when a Fingerprint vouched for the content instead of a
	// read: the content is then the declared one (sameContent).
	Size   int64
	Digest string
	// Target of a symlink.
	Target string
	// Version of an installed package.
	Version string
	// Home, Shell and supplementary Groups (sorted) of a user; UID and
	// GID are its ids, GID a group's.
	Home, Shell string
	Groups      []string
	// Enabled and Active of a service; nil when not read.
	Enabled *bool
	Active  *bool

	// nlink is the number of hard links of a file.
	nlink uint64
	// fileStat: what a Fingerprint keeps, from the lstat, or for a file
	// that was read from the fstat of the handle it was read through.
	fileStat
}

// observed is one observation made during a run.
type observed struct {
	st  State
	err error
	// gen is the tree generation the observation was made at.
	gen int
}

// worker holds what one goroutine reuses across files.
type worker struct {
	buf []byte // allocated on first read
	h   hash.Hash
	sum []byte
}

func newWorker() *worker {
	return &worker{h: sha256.New(), sum: make([]byte, 0, sha256.Size)}
}

// readBuf returns the worker's read buffer.
func (w *worker) readBuf() []byte {
	if w.buf == nil {
		w.buf = make([]byte, 32<<10)
	}
	return w.buf
}

// workers keeps one worker per goroutine of spread, for all of a run's
// passes.
type workers []*worker

func (ws *workers) get(i int) *worker {
	for len(*ws) <= i {
		*ws = append(*ws, newWorker())
	}
	return (*ws)[i]
}

// spread runs f(g, i) for every i in [0, n) on up to GOMAXPROCS
// goroutines, numbered g from 0, each taking chunk indexes at a time; it
// starts no more goroutines than there are per indexes for.
func spread(n, per, chunk int, f func(g, i int)) {
	gs := min(runtime.GOMAXPROCS(0), (n+per-1)/per)
	if gs <= 1 {
		for i := range n {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range gs {
		wg.Go(func() {
			for {
				start := int(next.Add(int64(chunk))) - chunk
				if start >= n {
					return
				}
				for i := start; i < min(start+chunk, n); i++ {
					f(g, i)
				}
			}
		})
	}
	wg.Wait()
}

// observePath reads the resource named base in directory d. content is
// the declared file content, compared while reading; it is only used for
// Kind File. A file that known vouches for is not read.
func observePath(w *worker, d *os.File, base string, kind Kind, content string, known *Fingerprint) (State, error) {
	var st State
	dfd := int(d.Fd())
	var s unix.Stat_t
	if err := unix.Fstatat(dfd, base, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return st, nil
		}
		return st, pathErr("lstat", d, base, err)
	}
	fill(&st, &s)
	switch {
	case st.Type == Symlink:
		t, err := readlinkAt(d, base)
		if err != nil {
			return st, pathErr("readlink", d, base, err)
		}
		st.Target = t
	case st.Type == File && kind == File && known != nil && known.vouches(&s, content):
		// Digest stays empty: the content is the declared one.
		st.sameContent = true
	case st.Type == File && kind == File:
		if err := readFile(w, d, base, &s, &st, content); err != nil {
			return st, err
		}
	}
	return st, nil
}

func fill(st *State, s *unix.Stat_t) {
	st.Exists = true
	st.Mode = s.Mode & 0o7777
	st.UID, st.GID = int(s.Uid), int(s.Gid)
	st.Size = s.Size
	st.nlink = uint64(s.Nlink)
	st.fileStat = fileStatOf(s)
	switch s.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		st.Type = File
	case unix.S_IFDIR:
		st.Type = Directory
	case unix.S_IFLNK:
		st.Type = Symlink
	case unix.S_IFIFO:
		st.Type = "fifo"
	case unix.S_IFSOCK:
		st.Type = "socket"
	default:
		st.Type = "device"
	}
}

// readFile hashes a regular file's content and compares it with the
// declared content on the way. The file is opened without following a
// symlink and without blocking, and must be the inode just looked at.
func readFile(w *worker, d *os.File, base string, s *unix.Stat_t, st *State, content string) error {
	fd, err := unix.Openat(int(d.Fd()), base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open", d, base, err)
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return pathErr("stat", d, base, err)
	}
	if fst.Dev != s.Dev || fst.Ino != s.Ino {
		// Replaced between lstat and open: describe what was opened.
		fill(st, &fst)
		if st.Type != File {
			return nil
		}
	}
	w.h.Reset()
	same := true
	var off int64
	for {
		n, err := unix.Read(fd, w.readBuf())
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return pathErr("read", d, base, err)
		}
		if n == 0 {
			break
		}
		b := w.buf[:n]
		w.h.Write(b)
		if same {
			end := off + int64(n)
			same = end <= int64(len(content)) && string(b) == content[off:end]
		}
		off += int64(n)
		if off == fst.Size && off > 0 {
			// All that fstat announced is read; growth after that
			// moment is not part of this observation.
			break
		}
	}
	st.Size = off
	st.fileStat = fileStatOf(&fst)
	st.read = off == fst.Size
	st.sameContent = same && off == int64(len(content))
	w.sum = w.h.Sum(w.sum[:0])
	st.Digest = digestString(w.sum)
	return nil
}

// digestString formats a sha256 sum as "sha256:<hex>" in one allocation.
func digestString(sum []byte) string {
	var b [7 + 2*sha256.Size]byte
	copy(b[:], "sha256:")
	hex.Encode(b[7:], sum)
	return string(b[:])
}

func contentDigest(content string) string {
	sum := sha256.Sum256([]byte(content))
	return digestString(sum[:])
}

// short abbreviates a digest for a line's detail.
func short(d string) string {
	if len(d) > 7+12 {
		return d[:7+12] + "…"
	}
	return d
}

// stateDigest is the digest of the verified state of a resource: sha256
// over a canonical text of "key value" lines (see the package doc).
func stateDigest(spec *Spec, st *State) string {
	b := make([]byte, 0, 256)
	b = append(b, "type "...)
	b = append(b, spec.Kind...)
	b = append(b, '\n')
	if isPath(spec.Kind) {
		b = append(b, "path "...)
		b = append(b, spec.Path...)
	} else {
		b = append(b, "name "...)
		b = append(b, spec.Name...)
	}
	b = append(b, '\n')
	switch {
	case spec.Kind == Service:
		if st.Enabled != nil {
			b = append(b, "enabled "...)
			b = strconv.AppendBool(b, *st.Enabled)
			b = append(b, '\n')
		}
		if st.Active != nil {
			b = append(b, "active "...)
			b = strconv.AppendBool(b, *st.Active)
			b = append(b, '\n')
		}
	case !st.Exists:
		b = append(b, "absent\n"...)
	case spec.Kind == Package:
		b = append(b, "version "...)
		b = append(b, st.Version...)
		b = append(b, '\n')
	case spec.Kind == Group:
		b = append(b, "gid "...)
		b = strconv.AppendInt(b, int64(st.GID), 10)
		b = append(b, '\n')
	case spec.Kind == User:
		b = append(b, "uid "...)
		b = strconv.AppendInt(b, int64(st.UID), 10)
		b = append(b, "\ngid "...)
		b = strconv.AppendInt(b, int64(st.GID), 10)
		b = append(b, "\nhome "...)
		b = append(b, st.Home...)
		b = append(b, "\nshell "...)
		b = append(b, st.Shell...)
		b = append(b, "\ngroups "...)
		b = append(b, strings.Join(st.Groups, ",")...)
		b = append(b, '\n')
	default:
		switch st.Type {
		case File:
			b = append(b, "content "...)
			b = append(b, st.Digest...)
			b = append(b, '\n')
		case Symlink:
			b = append(b, "target "...)
			b = append(b, st.Target...)
			b = append(b, '\n')
		}
		if st.Type != Symlink {
			b = append(b, "mode "...)
			b = appendMode(b, st.Mode)
			b = append(b, '\n')
		}
		b = append(b, "uid "...)
		b = strconv.AppendInt(b, int64(st.UID), 10)
		b = append(b, "\ngid "...)
		b = strconv.AppendInt(b, int64(st.GID), 10)
		b = append(b, '\n')
	}
	sum := sha256.Sum256(b)
	return digestString(sum[:])
}

func appendMode(b []byte, m uint32) []byte {
	s := strconv.FormatUint(uint64(m), 8)
	for i := len(s); i < 4; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

func modeString(m uint32) string { return string(appendMode(nil, m)) }

// Observe reads one resource's current state, for drift checks. A path is
// reached by the rules Apply uses, with no symlink declared: a symlink on
// the way to it is refused.
func (s *System) Observe(ctx context.Context, spec Spec) (State, error) {
	r := s.newRun(ctx, []Spec{spec})
	defer r.close()
	it := r.items[0]
	if it.err != nil {
		return State{}, it.err
	}
	if r.t != nil {
		r.t.links = nil
	}
	switch spec.Kind {
	case Package:
		r.observePackages()
	case Service:
		r.observeServices()
	case User, Group:
		r.observeAccounts()
	default:
		r.observePaths(r.t, nil)
	}
	return it.obs.st, it.obs.err
}
