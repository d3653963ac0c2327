package enrol

import (
	"errors"
	"fmt"
	"path/filepath"
	"unsafe"

	"github.com/muster-tool/muster/internal/bincode"
	"github.com/muster-tool/muster/internal/hugepage"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// The registry cache keeps the enrolment records the mesh has read and
// verified, so that the next command that needs the registry (report,
// declare, admit) opens only the records it has not seen: at 100,000
// nodes, opening every admission again is most of a report with nothing
// new. It holds records, not verdicts: who is trusted is computed afresh
// from them on every run (Registry.build), and a record is used only
// while the spool still lists it, so a record removed from the spool, or
// a spool restored from an older copy, counts as the spool says.
//
// Records never change once written (a spool refuses other bytes under a
// name), so a record is known by its name; where the listing gives sizes
// (S3), a size that differs from the cached one reads the record again.
//
// The file lives in the mesh directory's cache directory, beside the
// report cache, one per spool, and is written whole (bincode.WriteFile).
// Anything wrong with it — missing, damaged, another format, another
// spool or mesh — means the records are read from the spool again, never
// an error.

const (
	registryCacheVersion = 1
	registryCacheMagic   = "muster registry cache\n"
)

// registryCache is what the cache file holds: the records read, by the
// name of their object in the spool, with its size (-1: not known).
type registryCache struct {
	Spool, Mesh string
	Records     map[string]cachedRecord
	// JoinDirs are the directories of join requests (enrol/join/<token
	// id>/) in which every request was decided when they were listed, by
	// token id (see pendingByToken).
	JoinDirs map[string]joinDir
}

// joinDir is a directory of join requests as it was listed: its stamp,
// and the hosts whose requests it held.
type joinDir struct {
	Stamp spool.DirStamp
	Hosts []string
}

// cachedRecord is one verified record; exactly one of the pointers is set.
type cachedRecord struct {
	Size       int64
	Admission  *Admission
	Refusal    *Refusal
	Revocation *Revocation
	Label      *LabelChange
}

// cacheFile is where the cache of kind for spool lives in the mesh
// directory dir.
func cacheFile(dir, kind, spool string) string {
	return mesh.CacheFile(filepath.Join(dir, "cache"), kind, spool)
}

// RegistryCachePath is where the registry cache for spool lives in the
// mesh directory dir.
func RegistryCachePath(dir, spool string) string { return cacheFile(dir, "registry", spool) }

// readRegistryCache loads the cache at path for spool and mesh. It returns
// nil and why when there is none to use; a missing file is no reason.
func readRegistryCache(path, spool, mesh string) (*registryCache, error) {
	return readCacheFile(path, registryCacheMagic, spool, mesh, decodeRegistryCache,
		func(c *registryCache) (string, string) { return c.Spool, c.Mesh })
}

// readCacheFile reads the cache file at path (magic, see bincode.ReadFile),
// decodes its payload and checks that it was made for spool and mesh. It
// returns nil and why when there is none to use; a missing file is no
// reason. What decode returns may point into the payload, which is never
// written again.
func readCacheFile[C any](path, magic, spool, mesh string, decode func(string) (*C, error), owner func(*C) (spool, mesh string)) (*C, error) {
	payload, err := bincode.ReadFile(path, magic)
	if errors.Is(err, bincode.ErrNoFile) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := decode(unsafe.String(unsafe.SliceData(payload), len(payload)))
	if err != nil {
		return nil, err
	}
	cs, cm := owner(c)
	if err := bincode.CheckOwner(cs, cm, spool, mesh); err != nil {
		return nil, err
	}
	return c, nil
}

// appendCacheHeader writes what both caches of this package begin with:
// the format version, the spool and mesh the cache was made for, and the
// count of entries that follow.
func appendCacheHeader(e *bincode.Encoder, version int64, spool, mesh string, n int) {
	e.Int(version)
	e.Str(spool)
	e.Str(mesh)
	e.Uint(uint64(n))
}

// readCacheHeader reads what appendCacheHeader wrote, each entry taking at
// least least bytes, and refuses a cache in another format than version.
func readCacheHeader(d *bincode.Decoder, version int64, least int) (spool, mesh string, n int, err error) {
	if v := d.Int(); d.Err == nil && v != version {
		return "", "", 0, fmt.Errorf("in another format than this muster's (format %d)", version)
	}
	spool, mesh = d.Str(), d.Str()
	return spool, mesh, d.Count(least), nil
}

func writeRegistryCache(path string, c *registryCache) error {
	if err := bincode.WriteFile(path, registryCacheMagic, func(b []byte) []byte { return appendRegistryCache(b, c) }); err != nil {
		return fmt.Errorf("registry cache %s: %w", path, err)
	}
	return nil
}

// The payload: the format version, the spool and mesh, then the count of
// records and each one: its name, size, kind (1 admission, 2 refusal, 3
// revocation, 4 label change) and fields in the order of the type's; then
// the count of directories of decided join requests and each one: its
// token id, stamp (device, inode, change time) and hosts.
// Maps are a count and their pairs, lists a count and their elements.
// TestRegistryCacheCoversEveryField fails when a field is added to a
// record without being added here.

const (
	kindAdmission = 1 + iota
	kindRefusal
	kindRevocation
	kindLabel
)

func appendRegistryCache(b []byte, c *registryCache) []byte {
	e := &bincode.Encoder{B: b}
	appendCacheHeader(e, registryCacheVersion, c.Spool, c.Mesh, len(c.Records))
	for name, r := range c.Records {
		e.Str(name)
		e.Int(r.Size)
		switch {
		case r.Admission != nil:
			a := r.Admission
			e.Uint(kindAdmission)
			e.Int(int64(a.Version))
			e.Str(a.TokenID)
			e.Str(a.Name)
			e.Str(a.NodeID)
			e.Str(a.Host.Age)
			e.Str(a.Host.Sign)
			appendStrMap(e, a.Labels)
			e.Time(a.AdmittedAt)
			e.Str(a.Replaces)
			e.Time(a.CancelledAt)
			e.Str(a.CancelReason)
		case r.Refusal != nil:
			f := r.Refusal
			e.Uint(kindRefusal)
			e.Int(int64(f.Version))
			e.Str(f.TokenID)
			e.Str(f.HostFP)
			e.Str(f.Reason)
			e.Time(f.RefusedAt)
		case r.Revocation != nil:
			v := r.Revocation
			e.Uint(kindRevocation)
			e.Int(int64(v.Version))
			e.Str(v.NodeID)
			e.Str(v.Name)
			e.Time(v.RevokedAt)
			e.Str(v.Reason)
		case r.Label != nil:
			l := r.Label
			e.Uint(kindLabel)
			e.Int(int64(l.Version))
			e.Str(l.NodeID)
			e.Str(l.Name)
			e.Uint(l.Seq)
			appendStrMap(e, l.Set)
			e.Strs(l.Remove)
			e.Time(l.At)
		default:
			e.Uint(0)
		}
	}
	e.Uint(uint64(len(c.JoinDirs)))
	for tid, jd := range c.JoinDirs {
		e.Str(tid)
		e.Uint(jd.Stamp.Dev)
		e.Uint(jd.Stamp.Ino)
		e.Int(jd.Stamp.Ctime)
		e.Strs(jd.Hosts)
	}
	return e.B
}

func appendStrMap(e *bincode.Encoder, m map[string]string) {
	e.Uint(uint64(len(m)))
	for k, v := range m {
		e.Str(k)
		e.Str(v)
	}
}

// minRecord is the fewest bytes a record takes: name, size, kind;
// minJoinDir a directory of join requests: token id, stamp, hosts.
const (
	minRecord  = 3
	minJoinDir = 5
)

func decodeRegistryCache(s string) (*registryCache, error) {
	d := &bincode.Decoder{S: s}
	forSpool, forMesh, n, err := readCacheHeader(d, registryCacheVersion, minRecord)
	if err != nil {
		return nil, err
	}
	c := &registryCache{Spool: forSpool, Mesh: forMesh}
	labels := labelSets{}
	c.Records = make(map[string]cachedRecord, n)
	// The admissions in a few large arrays, not 100,000 allocations.
	var adms hugepage.Slab[Admission]
	for i := range n {
		name := d.Str()
		r := cachedRecord{Size: d.Int()}
		switch kind := d.Uint(); kind {
		case kindAdmission:
			r.Admission = adms.One(n - i)
			*r.Admission = Admission{Version: int(d.Int()), TokenID: d.Str(), Name: d.Str(), NodeID: d.Str(),
				Host: keys.Public{Age: d.Str(), Sign: d.Str()}, Labels: labels.read(d), AdmittedAt: d.Time(),
				Replaces: d.Str(), CancelledAt: d.Time(), CancelReason: d.Str()}
		case kindRefusal:
			r.Refusal = &Refusal{Version: int(d.Int()), TokenID: d.Str(), HostFP: d.Str(), Reason: d.Str(), RefusedAt: d.Time()}
		case kindRevocation:
			r.Revocation = &Revocation{Version: int(d.Int()), NodeID: d.Str(), Name: d.Str(), RevokedAt: d.Time(), Reason: d.Str()}
		case kindLabel:
			r.Label = &LabelChange{Version: int(d.Int()), NodeID: d.Str(), Name: d.Str(), Seq: d.Uint(), Set: strMap(d),
				Remove: d.Strs(), At: d.Time()}
		default:
			d.Failf("a record of kind %d", kind)
		}
		if _, dup := c.Records[name]; dup && d.Err == nil {
			d.Failf("listed twice")
		}
		if d.Err != nil {
			return nil, fmt.Errorf("does not decode: record %q: %v", name, d.Err)
		}
		c.Records[name] = r
	}
	n = d.Count(minJoinDir)
	c.JoinDirs = make(map[string]joinDir, n)
	for range n {
		tid := d.Str()
		jd := joinDir{Stamp: spool.DirStamp{Dev: d.Uint(), Ino: d.Uint(), Ctime: d.Int()}, Hosts: d.Strs()}
		if _, dup := c.JoinDirs[tid]; dup && d.Err == nil {
			d.Failf("join requests of token %s listed twice", tid)
		}
		c.JoinDirs[tid] = jd
	}
	if err := d.End("the records"); err != nil {
		return nil, err
	}
	return c, nil
}

// labelSets holds each set of labels read, by its bytes in the cache: the
// nodes of one role have the same labels, and a map made for each of
// 100,000 admissions is most of the cost of decoding them. Admissions and
// identities share their labels and never change them
// (applyLabelChanges makes a new map).
type labelSets map[string]map[string]string

// read reads a map of labels, the same map as for the same bytes before.
func (ls labelSets) read(d *bincode.Decoder) map[string]string {
	start := d.S
	n := d.Count(2)
	for range 2 * n {
		d.Str()
	}
	if d.Err != nil || n == 0 {
		return nil
	}
	raw := start[:len(start)-len(d.S)]
	if m, ok := ls[raw]; ok {
		return m
	}
	m := strMap(&bincode.Decoder{S: raw})
	ls[raw] = m
	return m
}

func strMap(d *bincode.Decoder) map[string]string {
	n := d.Count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := d.Str()
		m[k] = d.Str()
	}
	return m
}
