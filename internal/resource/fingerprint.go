package resource

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Fingerprint is what lstat said of a regular file when its content was
// read back and matched its declaration, with that content's sha256. Given
// last run's fingerprints (System.Known), the change phase takes a file whose
// device, inode, size, modification and status-change times are all as
// fingerprinted, and whose declared content has the fingerprinted digest, to
// hold its declared content without reading it, as git's index does. The
// read-back still reads every file: a fingerprint only spares the first
// look, never vouches for a line. A file that was rewritten behind an
// unchanged fingerprint (by setting the clock back to the nanosecond, by
// writing to the block device, or seen through a network filesystem that
// reports cached times) is not repaired in that run; its read-back fails
// the line, which leaves it without a fingerprint, so the next run reads
// and repairs it.
type Fingerprint struct {
	Path         string
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the Unix epoch
	Digest       [sha256.Size]byte
}

// A file gets a fingerprint only when its status last changed a while
// before its read-back began: a write in the same timestamp tick as that
// read could leave both its times as they were (the "racily clean" case of
// git's index). File times come from the kernel's coarse clock, at most a
// scheduler tick (10 ms at the slowest) behind the clock read here, so
// FingerprintSettle is ten such ticks. A filesystem that keeps whole seconds
// (both times without a nanosecond part: FAT, ext3's small inodes) gets
// CoarseFingerprintSettle, which covers FAT's two-second steps.
const (
	FingerprintSettle       = 100 * time.Millisecond
	CoarseFingerprintSettle = 3 * time.Second
)

// settled reports whether a file with these times, read back from
// readBackAt on, may be fingerprinted. A filesystem that reports no times
// (zero) gets no fingerprints.
func settled(mtime, ctime int64, readBackAt time.Time) bool {
	if mtime <= 0 || ctime <= 0 {
		return false
	}
	settle := FingerprintSettle
	if mtime%int64(time.Second) == 0 && ctime%int64(time.Second) == 0 {
		settle = CoarseFingerprintSettle
	}
	return ctime <= readBackAt.Add(-settle).UnixNano() && mtime <= readBackAt.Add(-settle).UnixNano()
}

// fileStat is the part of an lstat that a Fingerprint keeps beyond State.
type fileStat struct {
	dev, ino     uint64
	mtime, ctime int64
}

func fileStatOf(s *unix.Stat_t) fileStat {
	return fileStat{dev: uint64(s.Dev), ino: s.Ino, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano()}
}

// vouches reports whether f describes the file s describes, with content
// whose digest is that of content.
func (f *Fingerprint) vouches(s *unix.Stat_t, content string) bool {
	fs := fileStatOf(s)
	if f.Dev != fs.dev || f.Ino != fs.ino || f.Size != s.Size || f.Mtime != fs.mtime || f.Ctime != fs.ctime || f.Size != int64(len(content)) {
		return false
	}
	// Hashed in place, not copied: a copy of every declared file's content
	// on every run shows in apply's peak memory. content is only read.
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(content), len(content))) == f.Digest
}

// knownFiles finds last run's fingerprint of each path. The fingerprints
// come in declaration order, so a walk beside the specs finds them; a map
// is built only when the declaration changed.
type knownFiles struct {
	list   []Fingerprint
	next   int
	byPath map[string]*Fingerprint
}

func (k *knownFiles) find(path string) *Fingerprint {
	if k == nil || len(k.list) == 0 {
		return nil
	}
	if k.byPath == nil {
		if k.next < len(k.list) && k.list[k.next].Path == path {
			k.next++
			return &k.list[k.next-1]
		}
		k.byPath = make(map[string]*Fingerprint, len(k.list))
		for i := range k.list {
			k.byPath[k.list[i].Path] = &k.list[i]
		}
	}
	return k.byPath[path]
}

// Fingerprints returns, after Apply, the fingerprints of the files whose
// read-back matched and whose times had settled (see FingerprintSettle)
// when the read-back began, in declaration order. Give them to the next run
// as System.Known. When they are the ones Known held, Known itself is
// returned. The first call lets go of the run's state of each resource,
// about 550 bytes a resource that nothing reads after it (50 MiB for a
// host of 100,000 files, which the rest of its apply would otherwise hold
// on top); later calls return the same fingerprints.
func (s *System) Fingerprints() []Fingerprint {
	if s.fingerprinted {
		return s.fingerprints
	}
	r := s.last
	if r == nil || s.DryRun {
		return nil
	}
	s.fingerprints, s.fingerprinted, s.last = s.fingerprintsOf(r), true, nil
	return s.fingerprints
}

func (s *System) fingerprintsOf(r *run) []Fingerprint {
	var out []Fingerprint
	n := 0 // fingerprints so far; while out is nil, equal to s.Known[:n]
	for i, it := range r.items {
		st := &it.obs.st
		if it.spec.Kind != File || !st.read || !it.verified || !settled(st.mtime, st.ctime, r.readBackAt) {
			continue
		}
		fp := Fingerprint{Path: it.spec.Path, Dev: st.dev, Ino: st.ino, Size: st.Size, Mtime: st.mtime, Ctime: st.ctime}
		h := strings.TrimPrefix(st.Digest, "sha256:")
		if len(h) != hex.EncodedLen(len(fp.Digest)) {
			continue
		}
		var hb [2 * sha256.Size]byte
		copy(hb[:], h)
		if _, err := hex.Decode(fp.Digest[:], hb[:]); err != nil {
			continue
		}
		if out == nil && n < len(s.Known) && s.Known[n] == fp {
			n++
			continue
		}
		if out == nil {
			out = make([]Fingerprint, n, n+len(r.items)-i)
			copy(out, s.Known)
		}
		out = append(out, fp)
	}
	if out == nil {
		return s.Known[:n:n]
	}
	return out
}
