package enrol

import (
	"fmt"

	"github.com/muster-tool/muster/internal/bincode"
	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/outcome"
)

// The briefings cache keeps the newest briefing of each trusted node as it
// was opened and verified, so that the commands that need every node's
// briefing (declare, enrol list, brief list) open only those sent since:
// at 100,000 nodes, opening every briefing again was most of a declare.
// Like the registry cache it holds records, not verdicts: a briefing is
// used only while the spool still lists it as its node's newest, and only
// for a node Registry.Briefings would read it for (trusted now), so a
// revocation or a newer briefing counts at once. A node id is the
// fingerprint of the keys its briefings are verified with, so a briefing
// verified once under its name stays verified.
//
// The file lives beside the registry cache, one per spool, and is written
// whole (bincode.WriteFile). Anything wrong with it means the briefings
// are read from the spool again, never an error.

const (
	briefingsCacheVersion = 1
	briefingsCacheMagic   = "muster briefings cache\n"
)

// briefingsCache is what the cache file holds: the briefings, by the name
// of their object in the spool.
type briefingsCache struct {
	Spool, Mesh string
	Briefings   map[string]cachedBriefing
}

// cachedBriefing is one verified briefing and the size of its object (-1:
// not known).
type cachedBriefing struct {
	Size     int64
	Briefing *brief.Briefing
}

// BriefingsCachePath is where the briefings cache for spool lives in the
// mesh directory dir.
func BriefingsCachePath(dir, spool string) string { return cacheFile(dir, "briefings", spool) }

// readBriefingsCache loads the cache at path for spool and mesh. It
// returns nil and why when there is none to use; a missing file is no
// reason.
func readBriefingsCache(path, spool, mesh string) (*briefingsCache, error) {
	return readCacheFile(path, briefingsCacheMagic, spool, mesh, decodeBriefingsCache,
		func(c *briefingsCache) (string, string) { return c.Spool, c.Mesh })
}

func writeBriefingsCache(path string, c *briefingsCache) error {
	if err := bincode.WriteFile(path, briefingsCacheMagic, func(b []byte) []byte { return appendBriefingsCache(b, c) }); err != nil {
		return fmt.Errorf("briefings cache %s: %w", path, err)
	}
	return nil
}

// The payload: the format version, the spool and mesh, then the count of
// briefings and each one: its name, size and fields in the order of the
// type's, its lines as outcome.AppendLines writes them, then a flag for
// its facts and, when set, their fields in order.
// TestBriefingsCacheCoversEveryField fails when a field is added to a
// briefing without being added here.

func appendBriefingsCache(b []byte, c *briefingsCache) []byte {
	e := &bincode.Encoder{B: b}
	appendCacheHeader(e, briefingsCacheVersion, c.Spool, c.Mesh, len(c.Briefings))
	for name, cb := range c.Briefings {
		br := cb.Briefing
		e.Str(name)
		e.Int(cb.Size)
		e.Int(int64(br.Version))
		e.Str(br.Node)
		e.Time(br.Time)
		e.Str(br.Muster)
		outcome.AppendLines(e, br.Lines)
		e.Flag(br.Facts != nil)
		if f := br.Facts; f != nil {
			e.Str(f.Hostname)
			e.Str(f.OSID)
			e.Str(f.OSVersion)
			e.Str(f.OSCodename)
			e.Str(f.Arch)
			e.Int(int64(f.CPUs))
			e.Int(f.MemoryMB)
			e.Strs(f.Addresses)
		}
	}
	return e.B
}

// minBriefing is the fewest bytes a briefing takes: name, size, version,
// node, time, muster, lines, facts flag.
const minBriefing = 8

func decodeBriefingsCache(s string) (*briefingsCache, error) {
	d := &bincode.Decoder{S: s}
	forSpool, forMesh, n, err := readCacheHeader(d, briefingsCacheVersion, minBriefing)
	if err != nil {
		return nil, err
	}
	c := &briefingsCache{Spool: forSpool, Mesh: forMesh}
	c.Briefings = make(map[string]cachedBriefing, n)
	for range n {
		name := d.Str()
		cb := cachedBriefing{Size: d.Int(), Briefing: &brief.Briefing{Version: int(d.Int()), Node: d.Str(), Time: d.Time(), Muster: d.Str()}}
		cb.Briefing.Lines = outcome.ReadLines(d)
		if d.Flag() {
			cb.Briefing.Facts = &brief.Facts{Hostname: d.Str(), OSID: d.Str(), OSVersion: d.Str(), OSCodename: d.Str(),
				Arch: d.Str(), CPUs: int(d.Int()), MemoryMB: d.Int(), Addresses: d.Strs()}
		}
		if _, dup := c.Briefings[name]; dup && d.Err == nil {
			d.Failf("listed twice")
		}
		if d.Err != nil {
			return nil, fmt.Errorf("does not decode: briefing %q: %v", name, d.Err)
		}
		c.Briefings[name] = cb
	}
	if err := d.End("the briefings"); err != nil {
		return nil, err
	}
	return c, nil
}
