package repo

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

// Files in a materialized repository directory.
const (
	// PackagesFile is the flat repository's index, read by apt.
	PackagesFile = "Packages"
	// poolDir holds the verified .deb files.
	poolDir = "pool"
	// seqFile holds the sequence number of the index materialized.
	seqFile = "index-seq"
)

// SourcesLine is the apt sources.list line for a repository materialized
// in dir. [trusted=yes] is right here and only here: apt has no signature
// to check on a local flat repository, and none is needed, because muster
// verified the mesh's signature on the index and on every package, and
// each package's size and SHA-256, before writing the Packages file apt
// reads (and apt checks the files against those digests again).
func SourcesLine(dir string) string { return "deb [trusted=yes] file:" + dir + " ./" }

// Materialize makes dir a flat apt repository holding exactly the
// packages of the spool's newest repository index, and reports whether
// the Packages file changed (so the caller knows apt's package lists need
// updating). The index must be signed by meshSign, and every package
// object too; a package is written under dir only after its size and
// SHA-256 match the index, and the Packages file is replaced last, so apt
// never sees a package that was not verified, nor a half-fetched
// repository.
//
// A spool without a repository leaves dir alone. If dir already holds a
// newer index than the spool's newest (the spool was restored from an
// older copy), dir is kept as it is: every index holds all packages of
// the ones before it, so the newer one is the larger repository.
//
// Indexes that do not verify are skipped (see ReadIndexes) and named in
// skipped, for the caller to warn of.
func Materialize(ctx context.Context, sp spool.Spool, meshSign ed25519.PublicKey, dir string) (changed bool, skipped []string, err error) {
	x, err := ReadIndexes(ctx, sp, meshSign)
	if err != nil {
		return false, nil, err
	}
	changed, err = materialize(ctx, sp, meshSign, x.Newest, dir)
	return changed, x.Skipped, err
}

func materialize(ctx context.Context, sp spool.Spool, meshSign ed25519.PublicKey, ix *Index, dir string) (changed bool, err error) {
	if ix == nil {
		return false, nil
	}
	if have := readSeq(dir); have > ix.Seq {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, poolDir), 0o755); err != nil {
		return false, fmt.Errorf("package repository %s: %w", dir, err)
	}
	keep := map[string]bool{}
	for _, p := range ix.Packages {
		rel := poolPath(p)
		keep[rel] = true
		if err := fetch(ctx, sp, meshSign, p, filepath.Join(dir, rel)); err != nil {
			return false, err
		}
	}
	index := packagesFile(ix)
	path := filepath.Join(dir, PackagesFile)
	if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, index) {
		if err := atomicfile.WriteFile(path, index, 0o644); err != nil {
			return false, fmt.Errorf("package repository %s: %w", dir, err)
		}
		changed = true
	}
	if readSeq(dir) != ix.Seq {
		if err := atomicfile.WriteFile(filepath.Join(dir, seqFile), []byte(strconv.FormatUint(ix.Seq, 10)+"\n"), 0o644); err != nil {
			return changed, fmt.Errorf("package repository %s: %w", dir, err)
		}
	}
	// What the index no longer names (and temp files of an interrupted
	// run) goes, once the Packages file no longer names it either.
	return changed, prune(filepath.Join(dir, poolDir), dir, keep)
}

// poolPath is where a package's file lives below the repository
// directory: the same path as below the spool's repo/.
func poolPath(p Package) string {
	return filepath.FromSlash(strings.TrimPrefix(p.Object, spool.RepoPrefix))
}

// fetch makes file hold package p. A file already there with p's size was
// verified when it was written; apt checks its digest again on install.
func fetch(ctx context.Context, sp spool.Spool, meshSign ed25519.PublicKey, p Package, file string) error {
	if fi, err := os.Stat(file); err == nil && fi.Mode().IsRegular() && fi.Size() == p.Size {
		return nil
	}
	data, err := sp.Get(ctx, p.Object, maxPackage)
	if err != nil {
		return fmt.Errorf("package %s: %w", p, err)
	}
	payload, err := bundle.OpenSigned(data, packageCtx(p.Object), meshSign)
	if err != nil {
		return fault.New(fault.Refused, fmt.Errorf("package %s refused: pool object %s: %w", p, p.Object, err))
	}
	sum := sha256.Sum256(payload)
	if int64(len(payload)) != p.Size || hex.EncodeToString(sum[:]) != p.SHA256 {
		return fault.Refusedf("package %s refused: pool object %s holds %d bytes with sha256 %s, the index says %d bytes with sha256 %s",
			p, p.Object, len(payload), hex.EncodeToString(sum[:]), p.Size, p.SHA256)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(file, payload, 0o644); err != nil {
		return fmt.Errorf("package %s: %w", p, err)
	}
	return nil
}

// packagesFile writes the flat repository's Packages file: each package's
// control paragraph followed by where the file is and its digest.
func packagesFile(ix *Index) []byte {
	ps := append([]Package(nil), ix.Packages...)
	sort.Slice(ps, func(i, j int) bool { return less(ps[i], ps[j]) })
	var b bytes.Buffer
	for _, p := range ps {
		b.WriteString(strings.TrimSuffix(p.Control, "\n"))
		fmt.Fprintf(&b, "\nFilename: ./%s\nSize: %d\nSHA256: %s\n\n", filepath.ToSlash(poolPath(p)), p.Size, p.SHA256)
	}
	return b.Bytes()
}

func readSeq(dir string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, seqFile))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// prune removes files below pool that keep does not name (paths relative
// to dir), and directories left empty.
func prune(pool, dir string, keep map[string]bool) error {
	var dirs []string
	err := filepath.WalkDir(pool, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != pool {
				dirs = append(dirs, path)
			}
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || keep[rel] {
			return err
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("package repository %s: %w", dir, err)
	}
	// Deepest first; a directory that is not empty stays.
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
	return nil
}
