package repo

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

// Deb is a package file read for adding.
type Deb struct {
	// Path names the file in messages.
	Path string
	Data []byte
	Package
}

// ReadDeb reads a .deb file and its control paragraph. The paragraph comes
// from dpkg-deb --field, the tool that builds packages, so muster reads a
// package exactly as dpkg will (and needs no decompressor of its own for
// the control member, which dpkg-deb writes with xz).
func ReadDeb(ctx context.Context, path string) (*Deb, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("package file: %w", err)
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		return nil, fault.WithHint(fmt.Errorf("read package %s: dpkg-deb not found", path),
			"install dpkg (on Debian and Ubuntu it is always there; elsewhere, for example: brew install dpkg)")
	}
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--field", "--", path)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		msg = strings.TrimPrefix(msg, "dpkg-deb: error: ")
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("%s is not a Debian package: %s", path, firstLine(msg))
	}
	c, err := parseControl(string(out))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	d := &Deb{Path: path, Data: data, Package: Package{
		Name:    c.get("Package"),
		Version: c.get("Version"),
		Arch:    c.get("Architecture"),
		Size:    int64(len(data)),
		SHA256:  hex.EncodeToString(sum[:]),
		Control: c.withoutIndexFields(),
	}}
	if err := checkName(d.Name); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkVersion(d.Version); err != nil {
		return nil, fmt.Errorf("%s: package %s: %w", path, d.Name, err)
	}
	if err := checkArch(d.Arch); err != nil {
		return nil, fmt.Errorf("%s: package %s: %w", path, d.Name, err)
	}
	d.Object = ObjectName(d.Name, d.Version, d.Arch)
	if err := spool.ValidName(d.Object); err != nil {
		return nil, fmt.Errorf("%s: package %s: its name and version make no valid object name: %w", path, d.Package, err)
	}
	if len(data) > bundle.MaxPayload {
		return nil, fault.WithHint(fmt.Errorf("%s: package %s is %d bytes; the spool's repository holds packages up to %d bytes", path, d.Package, len(data), bundle.MaxPayload),
			"publish it in an ordinary apt repository instead (see muster-upgrade(7))")
	}
	return d, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Added says what Add did with one package.
type Added struct {
	Package
	// Path is the file it was read from.
	Path string
	// Present: the repository already held this very file; nothing was
	// written for it.
	Present bool
}

// AddResult is what one Add did.
type AddResult struct {
	// Index is the sequence number of the index written, or of the
	// newest one when every package was already present.
	Index    uint64
	Packages []Added
}

// maxAddAttempts bounds the retries when other adds write indexes at the
// same time.
const maxAddAttempts = 20

// Add stores each package in the spool's pool (once: a package already
// there with the same bytes is left as it is) and writes a new index
// listing every package. A package whose name, version and architecture
// are in the repository with other bytes is refused: apt would see two
// different files under one version, so a rebuilt package needs a new
// version. Nothing is written for a batch with a refused package.
//
// Two adds at once do not lose each other's packages: each writes index
// seq+1 only if it does not exist yet (the spool's create-if-absent), and
// the loser reads the winner's index and tries again.
func Add(ctx context.Context, sp spool.Spool, sign ed25519.PrivateKey, debs []*Deb, now time.Time) (*AddResult, error) {
	meshSign := sign.Public().(ed25519.PublicKey)
	batch := map[string]*Deb{}
	for _, d := range debs {
		if o, ok := batch[d.key()]; ok {
			if !o.same(d.Package) {
				return nil, fmt.Errorf("%s and %s are both package %s, with different content", o.Path, d.Path, d.Package)
			}
			continue
		}
		batch[d.key()] = d
	}
	for attempt := 0; attempt < maxAddAttempts; attempt++ {
		x, err := ReadIndexes(ctx, sp, meshSign)
		if err != nil {
			return nil, err
		}
		ix := x.Newest
		if ix == nil {
			ix = &Index{Version: FormatVersion}
		}
		have := map[string]Package{}
		for _, p := range ix.Packages {
			have[p.key()] = p
		}
		res := &AddResult{Index: ix.Seq}
		var fresh []Package
		for _, d := range debs {
			p, ok := have[d.key()]
			switch {
			case ok && !p.same(d.Package):
				return nil, fault.WithHint(fmt.Errorf("%s: package %s is already in the repository with different content (sha256 %s, index %d)", d.Path, d.Package, p.SHA256, ix.Seq),
					"a version is published once: build the changed package with a new version")
			case ok:
				res.Packages = append(res.Packages, Added{Package: p, Path: d.Path, Present: true})
			default:
				if !containsKey(fresh, d.key()) {
					fresh = append(fresh, d.Package)
				}
				res.Packages = append(res.Packages, Added{Package: d.Package, Path: d.Path})
			}
		}
		if len(fresh) == 0 {
			return res, nil
		}
		// The pool objects first: an index never names an object that is
		// not there yet.
		for _, p := range fresh {
			if err := putPackage(ctx, sp, sign, batch[p.key()]); err != nil {
				return nil, err
			}
		}
		// After the newest index that verifies, at the first number junk
		// has not taken.
		next := &Index{Version: FormatVersion, Seq: x.nextFree(ix.Seq), Created: now.UTC().Truncate(time.Second)}
		next.Packages = append(append(next.Packages, ix.Packages...), fresh...)
		sort.Slice(next.Packages, func(i, j int) bool { return less(next.Packages[i], next.Packages[j]) })
		name := IndexName(next.Seq)
		data, err := bundle.SignTOML(next, indexCtx(name), sign)
		if err != nil {
			return nil, err
		}
		err = sp.Put(ctx, name, data)
		if errors.Is(err, spool.ErrConflict) {
			continue // another add took this index: start again from it
		}
		if err != nil {
			return nil, fmt.Errorf("write repository index %s: %w", name, err)
		}
		res.Index = next.Seq
		return res, nil
	}
	return nil, fault.Temporaryf("repository index in spool %s: other adds kept writing new indexes; try again", sp)
}

func containsKey(ps []Package, key string) bool {
	for _, p := range ps {
		if p.key() == key {
			return true
		}
	}
	return false
}

func less(a, b Package) bool {
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	if a.Version != b.Version {
		return a.Version < b.Version
	}
	return a.Arch < b.Arch
}

// putPackage writes a package's pool object. An object already there is
// accepted when it holds the same .deb: a muster of another version may
// compress the same bytes differently, so the bundles are compared by
// what they carry.
func putPackage(ctx context.Context, sp spool.Spool, sign ed25519.PrivateKey, d *Deb) error {
	data, err := bundle.Sign(d.Data, packageCtx(d.Object), sign)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Path, err)
	}
	err = sp.Put(ctx, d.Object, data)
	if !errors.Is(err, spool.ErrConflict) {
		if err != nil {
			return fmt.Errorf("store package %s as %s: %w", d.Package, d.Object, err)
		}
		return nil
	}
	old, err := sp.Get(ctx, d.Object, maxPackage)
	if err != nil {
		return err
	}
	payload, err := bundle.OpenSigned(old, packageCtx(d.Object), sign.Public().(ed25519.PublicKey))
	if err != nil {
		return fault.New(fault.Refused, fmt.Errorf("pool object %s refused: %w", d.Object, err))
	}
	if sum := sha256.Sum256(payload); hex.EncodeToString(sum[:]) != d.SHA256 {
		return fault.WithHint(fmt.Errorf("%s: pool object %s already holds package %s with different content", d.Path, d.Object, d.Package),
			"a version is published once: build the changed package with a new version")
	}
	return nil
}
