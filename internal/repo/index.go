// Package repo owns the mesh's package repository inside the spool, so that
// packages (muster itself first) reach hosts by the same copy that carries
// their declarations: a directory spool taken by sneakernet or an S3 bucket,
// with no HTTP server anywhere.
//
// Spool objects never change, and a flat apt repository's Packages file
// does. So the spool holds each .deb once, as a bundle signed by the mesh
// under repo/pool/<name>/<version>_<arch>.deb, and every `muster spool repo
// add` writes a new signed index, repo/index/<seq>, listing every package
// with its control paragraph, size and SHA-256. A host materializes the
// newest index into a local directory: it verifies the index against the
// mesh key it pinned, fetches the .deb files it lacks, checks each one's
// signature, size and digest, and only then writes the Packages file apt
// reads through a file: source.
package repo

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

// FormatVersion is the version of the index document.
const FormatVersion = 1

// Where the repository lives in the spool.
const (
	IndexPrefix = spool.RepoIndexPrefix
	PoolPrefix  = spool.RepoPrefix + "pool/"
)

// maxIndex bounds an index object: thousands of packages fit.
const maxIndex = 16 << 20

// maxPackage bounds a pool object: the largest bundle there is.
const maxPackage = bundle.MaxBody + 64

// Index is one repo/index/<seq> object: every package the repository
// holds. Each add writes a new index that lists what the previous one did
// plus the new packages, so the newest index is the whole repository.
type Index struct {
	Version  int       `toml:"version"`
	Seq      uint64    `toml:"seq"`
	Created  time.Time `toml:"created"`
	Packages []Package `toml:"package"`
}

// Package is one .deb in the repository.
type Package struct {
	Name    string `toml:"name"`
	Version string `toml:"version"`
	Arch    string `toml:"arch"`
	Size    int64  `toml:"size"`
	SHA256  string `toml:"sha256"`
	// Object is the pool object holding the .deb.
	Object string `toml:"object"`
	// Control is the package's control paragraph as dpkg-deb prints it,
	// without the fields a repository index adds (Filename, Size and
	// the digests).
	Control string `toml:"control"`
}

// String names a package the way apt does: name=version (arch).
func (p Package) String() string { return fmt.Sprintf("%s %s (%s)", p.Name, p.Version, p.Arch) }

// same reports whether two entries are the same package file.
func (p Package) same(q Package) bool { return p.SHA256 == q.SHA256 && p.Size == q.Size }

// key identifies a package in the repository: one file per name, version
// and architecture, as apt expects.
func (p Package) key() string { return p.Name + "\x00" + p.Version + "\x00" + p.Arch }

// IndexName names index seq.
func IndexName(seq uint64) string { return IndexPrefix + spool.SeqName(seq) }

// ObjectName names the pool object of a package. Debian names and
// versions may hold characters object names may not ("+", "~", ":", upper
// case), so every byte outside a-z 0-9 "." "-" is written as "_" and two
// hex digits; "_" itself never occurs in a Debian name, version or
// architecture, so the mapping is one to one and the last "_" of the file
// name always separates the version from the architecture.
func ObjectName(name, version, arch string) string {
	return PoolPrefix + escape(name) + "/" + escape(version) + "_" + escape(arch) + ".deb"
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		plain := 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-'
		// A segment may not start with "." or "-" nor end with ".".
		if (i == 0 && (c == '.' || c == '-')) || (i == len(s)-1 && c == '.') {
			plain = false
		}
		if plain {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

func indexCtx(name string) bundle.Context { return bundle.Context{Kind: "repo-index", Name: name} }

func packageCtx(name string) bundle.Context {
	return bundle.Context{Kind: "repo-package", Name: name}
}

// Indexes is what a spool's repository indexes hold for one mesh: the
// newest index that verifies against the mesh's key, and the ones above it
// that do not, which are junk (signed by another key, damaged): skipped,
// never used, never deleted.
type Indexes struct {
	// Newest is the newest index that verifies, nil if there is none.
	Newest *Index
	// Skipped says which indexes did not verify, and why.
	Skipped []string
	listed  map[uint64]bool
}

// ReadIndexes lists the repository indexes and reads them newest first
// until one verifies against meshSign. Only an error reaching the spool is
// returned.
func ReadIndexes(ctx context.Context, sp spool.Spool, meshSign ed25519.PublicKey) (*Indexes, error) {
	x := &Indexes{listed: map[uint64]bool{}}
	var seqs []uint64
	err := sp.List(ctx, IndexPrefix, func(i spool.Info) error {
		seq, err := spool.ParseSeq(strings.TrimPrefix(i.Name, IndexPrefix))
		if err == nil {
			seqs = append(seqs, seq)
			x.listed[seq] = true
		}
		return nil // strays are spool verify's business
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] > seqs[j] })
	for _, seq := range seqs {
		ix, err := readIndex(ctx, sp, seq, meshSign)
		switch {
		case err == nil:
			x.Newest = ix
			return x, nil
		case errors.Is(err, spool.ErrNotFound):
			continue // removed since the listing
		case errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) == fault.Temporary || ctx.Err() != nil:
			return nil, err
		}
		x.Skipped = append(x.Skipped, fmt.Sprintf("%s skipped: %v", IndexName(seq), err))
	}
	return x, nil
}

// nextFree is the first sequence number after seq that no index object
// has taken, not even junk.
func (x *Indexes) nextFree(seq uint64) uint64 {
	next := seq + 1
	for x.listed[next] {
		next++
	}
	return next
}

func readIndex(ctx context.Context, sp spool.Spool, seq uint64, meshSign ed25519.PublicKey) (*Index, error) {
	name := IndexName(seq)
	data, err := sp.Get(ctx, name, maxIndex)
	if err != nil {
		return nil, err
	}
	var ix Index
	if err := bundle.OpenSignedTOML(data, indexCtx(name), meshSign, &ix); err != nil {
		return nil, fault.New(fault.Refused, fmt.Errorf("repository index %s refused: %w", name, err))
	}
	if ix.Version != FormatVersion {
		return nil, fmt.Errorf("repository index %s: unknown version %d", name, ix.Version)
	}
	if ix.Seq != seq {
		return nil, fault.Refusedf("repository index %s refused: it says it is index %d", name, ix.Seq)
	}
	seen := map[string]bool{}
	for _, p := range ix.Packages {
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("repository index %s: %w", name, err)
		}
		if seen[p.key()] {
			return nil, fmt.Errorf("repository index %s lists %s twice", name, p)
		}
		seen[p.key()] = true
	}
	return &ix, nil
}

// check refuses an entry that could not be written into a Packages file
// as it stands: a control paragraph apt would read differently, or a pool
// object that is not this package's.
func (p Package) check() error {
	if err := checkName(p.Name); err != nil {
		return err
	}
	if err := checkVersion(p.Version); err != nil {
		return fmt.Errorf("package %s: %w", p.Name, err)
	}
	if err := checkArch(p.Arch); err != nil {
		return fmt.Errorf("package %s: %w", p.Name, err)
	}
	if p.Object != ObjectName(p.Name, p.Version, p.Arch) {
		return fmt.Errorf("package %s: object %s is not its pool object", p, p.Object)
	}
	if p.Size <= 0 || len(p.SHA256) != 64 || strings.Trim(p.SHA256, "0123456789abcdef") != "" {
		return fmt.Errorf("package %s: size or sha256 missing", p)
	}
	c, err := parseControl(p.Control)
	if err != nil {
		return fmt.Errorf("package %s: %w", p, err)
	}
	if c.get("Package") != p.Name || c.get("Version") != p.Version || c.get("Architecture") != p.Arch {
		return fmt.Errorf("package %s: its control paragraph names %s %s (%s)", p, c.get("Package"), c.get("Version"), c.get("Architecture"))
	}
	return nil
}

// Versions returns the versions the index holds of package name, each
// once, in the index's order, and for each the architectures it has.
func (ix *Index) Versions(name string) (versions []string, arches map[string][]string) {
	arches = map[string][]string{}
	if ix == nil {
		return nil, arches
	}
	for _, p := range ix.Packages {
		if p.Name != name {
			continue
		}
		if _, ok := arches[p.Version]; !ok {
			versions = append(versions, p.Version)
		}
		arches[p.Version] = append(arches[p.Version], p.Arch)
	}
	return versions, arches
}
