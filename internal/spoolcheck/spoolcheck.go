// Package spoolcheck owns the structural check of a spool: that every
// object has a name the layout in spool/doc.go knows and is a whole bundle
// by its header (bundle.Inspect), and that nothing else lies in a directory
// spool but temp files of writes in progress. It needs no key, so anyone
// holding a copy of the spool (a USB stick, a mirror) can check it; it
// catches truncated, padded and misfiled objects. Of the public objects
// (commits, repository indexes) it also checks the signer against the
// mesh's key as the spool's mesh/keys publishes it, and the history the
// commits form: junk signed by another key and forks (two histories of the
// mesh merged) are listed. Forged sealed objects only the readers holding
// keys can refuse. Object is also the check spool sync applies before
// copying, so damage does not spread.
package spoolcheck

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// MaxObject is the largest object a whole bundle can be: the largest body
// the format allows plus its header line.
const MaxObject = int64(bundle.MaxBody) + 64

// TempAge is how old a temp file must be before it counts as left behind
// by an interrupted write rather than a write in progress.
const TempAge = time.Hour

// Kinds of problems.
const (
	Damaged       = "damaged"        // the bytes are not a whole bundle
	Misfiled      = "misfiled"       // a signed bundle made for another name
	UnknownPrefix = "unknown-prefix" // a name the layout does not know
	BadLayout     = "bad-layout"     // a known prefix, but the rest of the name is wrong
	SizeMismatch  = "size-mismatch"  // the object's size changed between listing and reading
	TempFile      = "temp-file"      // a temp file older than TempAge
	Stray         = "stray"          // a file no object can be (directory spools)
	Foreign       = "foreign"        // a public object not signed by the mesh's key, or a commit that does not verify
	Fork          = "fork"           // a commit whose history is not the one the spool's other commits form
	NoMeshKeys    = "no-mesh-keys"   // mesh/keys is missing or does not verify: signers and forks were not checked
)

// Problem is one thing wrong in a spool.
type Problem struct {
	Object string `json:"object"` // the object's name, or the path of a stray file
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

func (p Problem) String() string { return p.Kind + " " + p.Object + ": " + p.Detail }

// Report is what Verify found.
type Report struct {
	Spool    string    `json:"spool"`
	Objects  int       `json:"objects"`
	Bytes    int64     `json:"bytes"`
	Problems []Problem `json:"problems"`
}

// Options tunes Verify.
type Options struct {
	// Workers is how many objects are read at once (default 8).
	Workers int
	// TempAge overrides TempAge, for tests.
	TempAge time.Duration
}

// Verify reads every object of sp and checks its name (Layout) and bytes
// (Object). For a directory spool it also reports temp files older than
// TempAge and files that no object can be, such as partial files left by
// rsync. Problems are in order of name; an error is returned only when the
// spool cannot be read.
func Verify(ctx context.Context, sp spool.Spool, opts Options) (Report, error) {
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	if opts.TempAge <= 0 {
		opts.TempAge = TempAge
	}
	rep := Report{Spool: sp.String()}
	var objs []spool.Info
	if err := sp.List(ctx, "", func(i spool.Info) error {
		objs = append(objs, i)
		return nil
	}); err != nil {
		return rep, err
	}
	rep.Objects = len(objs)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
		next     = make(chan spool.Info)
		signed   []signedObject
	)
	add := func(p Problem) {
		mu.Lock()
		rep.Problems = append(rep.Problems, p)
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(opts.Workers, max(len(objs), 1)) {
		wg.Go(func() {
			for info := range next {
				mu.Lock()
				rep.Bytes += info.Size
				mu.Unlock()
				if err := Layout(info.Name); err != nil {
					add(Problem{Object: info.Name, Kind: kindOf(err), Detail: err.Error()})
				}
				data, err := sp.Get(ctx, info.Name, MaxObject)
				switch {
				case errors.Is(err, spool.ErrNotFound):
					continue // removed by gc since the listing
				case errors.Is(err, spool.ErrTooLarge):
					add(Problem{Object: info.Name, Kind: Damaged, Detail: fmt.Sprintf("%d bytes, larger than any bundle (%d)", info.Size, MaxObject)})
					continue
				case err != nil:
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					continue
				}
				if int64(len(data)) != info.Size {
					add(Problem{Object: info.Name, Kind: SizeMismatch, Detail: fmt.Sprintf("listed with %d bytes, read %d: it is being written in place, or was changed", info.Size, len(data))})
					continue
				}
				h, err := object(info.Name, data)
				if err != nil {
					add(Problem{Object: info.Name, Kind: kindOf(err), Detail: err.Error()})
					continue
				}
				if h != nil && h.Mode == bundle.Signed {
					mu.Lock()
					signed = append(signed, signedObject{name: info.Name, signer: h.Signer, data: keepIfSmall(info.Name, data)})
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, o := range objs {
		select {
		case next <- o:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return rep, firstErr
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	rep.Problems = append(rep.Problems, history(signed)...)
	if d, ok := sp.(*spool.Dir); ok {
		ps, err := dirProblems(ctx, d, opts.TempAge)
		if err != nil {
			return rep, err
		}
		rep.Problems = append(rep.Problems, ps...)
	}
	slices.SortFunc(rep.Problems, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.Object, b.Object), strings.Compare(a.Kind, b.Kind))
	})
	return rep, nil
}

// problemError is an error that says which kind of problem it is.
type problemError struct {
	kind string
	err  error
}

func (e *problemError) Error() string { return e.err.Error() }
func (e *problemError) Unwrap() error { return e.err }

func problem(kind, format string, args ...any) error {
	return &problemError{kind: kind, err: fmt.Errorf(format, args...)}
}

func kindOf(err error) string {
	var pe *problemError
	if errors.As(err, &pe) {
		return pe.kind
	}
	return Damaged
}

// Object checks that data is a whole bundle by its header and structure,
// as bundle.Inspect does without keys, and that a signed bundle was made
// for this name. Objects under repo/ are package repository files, not
// bundles, and are not checked, but for the signed indexes. Its errors do
// not name the object: the caller does.
func Object(name string, data []byte) error {
	_, err := object(name, data)
	return err
}

// object is Object, returning the header it read (nil for a repository
// file that is not a bundle).
func object(name string, data []byte) (*bundle.Header, error) {
	if strings.HasPrefix(name, spool.RepoPrefix) && !strings.HasPrefix(name, spool.RepoIndexPrefix) {
		return nil, nil
	}
	h, err := bundle.Inspect(data)
	if err != nil {
		return nil, problem(Damaged, "%v", err)
	}
	if h.Mode == bundle.Signed && h.Context.Name != "" && h.Context.Name != name {
		return nil, problem(Misfiled, "a bundle signed for object %s, not this one", h.Context.Name)
	}
	return &h, nil
}

// signedObject is a public object's signer, and its bytes when the history
// check needs them (mesh/keys and commits, which are small).
type signedObject struct {
	name   string
	signer ed25519.PublicKey
	data   []byte
}

func keepIfSmall(name string, data []byte) []byte {
	if name == spool.MeshKeysName || strings.HasPrefix(name, spool.CommitPrefix) {
		return data
	}
	return nil
}

// history checks the public objects against the mesh's key as mesh/keys
// publishes it: an object signed by another key, or a commit that does
// not verify, is foreign (muster skips it); a commit whose history passes
// over or replaces another commit the spool holds is a fork.
func history(signed []signedObject) []Problem {
	var key ed25519.PublicKey
	var keysErr error = errors.New("the spool has no mesh/keys object")
	for _, o := range signed {
		if o.name == spool.MeshKeysName {
			key, keysErr = mesh.PublishedSigner(o.data)
		}
	}
	if keysErr != nil {
		var n int
		for _, o := range signed {
			if o.name != spool.MeshKeysName {
				n++
			}
		}
		if n == 0 {
			return nil
		}
		return []Problem{{Object: spool.MeshKeysName, Kind: NoMeshKeys,
			Detail: fmt.Sprintf("%v: the signers of %d public objects and the history of the commits were not checked", keysErr, n)}}
	}
	var out []Problem
	var commits []*generation.Commit
	for _, o := range signed {
		if o.name == spool.MeshKeysName {
			continue
		}
		if !o.signer.Equal(key) {
			out = append(out, Problem{Object: o.name, Kind: Foreign,
				Detail: fmt.Sprintf("signed by key %x, not by the mesh's key %x that mesh/keys publishes: muster skips it and never deletes it", []byte(o.signer), []byte(key))})
			continue
		}
		gen, err := spool.ParseCommitName(o.name)
		if err != nil {
			continue
		}
		c, err := generation.OpenCommit(o.data, gen, key)
		if err != nil {
			out = append(out, Problem{Object: o.name, Kind: Foreign, Detail: fmt.Sprintf("%v: muster skips it", err)})
			continue
		}
		commits = append(commits, c)
	}
	for _, f := range generation.ForksOf(commits) {
		out = append(out, Problem{Object: spool.CommitName(f.Generation), Kind: Fork,
			Detail: f.String() + "; hosts that applied one refuse the other: sync the copy holding the history the mesh keeps, and see muster-declare(1), ONE HISTORY"})
	}
	return out
}

// layout lists each known prefix with the number of segments below it and
// the parser, if any, that checks them.
var layout = []struct {
	prefix string
	segs   int // segments after the prefix; 0 for "any"
	parse  func(string) error
}{
	{spool.EnrolTokenPrefix, 1, nil},
	{spool.EnrolJoinPrefix, 2, nil},
	{spool.EnrolAdmitPrefix, 1, nil},
	{spool.EnrolRefusedPrefix, 2, nil},
	{spool.EnrolRevokePrefix, 1, nil},
	{spool.EnrolLabelPrefix, 2, func(n string) error { _, _, err := spool.ParseLabelName(n); return err }},
	{spool.BriefPrefix, 2, func(n string) error { _, _, err := spool.ParseBriefName(n); return err }},
	{spool.DeclPrefix, 3, func(n string) error { _, _, _, err := spool.ParseDeclName(n); return err }},
	{spool.ManifestPrefix, 2, func(n string) error {
		gen, _, _ := strings.Cut(strings.TrimPrefix(n, spool.ManifestPrefix), "/")
		_, err := spool.ParseGeneration(gen)
		return err
	}},
	{spool.CommitPrefix, 1, func(n string) error { _, err := spool.ParseCommitName(n); return err }},
	{spool.ReportPrefix, 2, func(n string) error { _, _, _, err := spool.ParseReportName(n); return err }},
	{spool.RepoPrefix, 0, nil},
}

// Layout checks a name against the spool's layout (spool/doc.go): a valid
// name under a known prefix, with the number of segments and the numbers
// that prefix wants.
func Layout(name string) error {
	if err := spool.ValidName(name); err != nil {
		return problem(BadLayout, "%v", err)
	}
	if name == spool.MeshKeysName {
		return nil
	}
	for _, l := range layout {
		rest, ok := strings.CutPrefix(name, l.prefix)
		if !ok {
			continue
		}
		if l.segs > 0 && strings.Count(rest, "/")+1 != l.segs {
			return problem(BadLayout, "want %d name segments after %s, found %d", l.segs, l.prefix, strings.Count(rest, "/")+1)
		}
		if l.parse != nil {
			if err := l.parse(name); err != nil {
				return problem(BadLayout, "%v", err)
			}
		}
		return nil
	}
	return problem(UnknownPrefix, "no object of the spool's layout starts so (see muster-spool(5))")
}

// dirProblems finds what a directory spool holds besides its objects: temp
// files older than maxAge, and files and directories no object name can
// map to. Temp files younger than maxAge belong to writes in progress.
func dirProblems(ctx context.Context, d *spool.Dir, maxAge time.Duration) ([]Problem, error) {
	var out []Problem
	err := d.Temps(ctx, func(p string, age time.Duration) error {
		if age >= maxAge {
			out = append(out, Problem{Object: filepath.Base(p), Kind: TempFile,
				Detail: fmt.Sprintf("left by a write interrupted %s ago; muster spool gc removes it", age.Round(time.Minute))})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := os.ReadDir(filepath.Join(d.Path(), filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("spool %s: read directory %s: %w", d, cmp.Or(rel, "/"), err)
		}
		for _, e := range ents {
			name := path.Join(rel, e.Name())
			if rel == "" && atomicfile.IsTemp(e.Name()) && e.Type().IsRegular() {
				continue // Temps handled it
			}
			if spool.ValidName(name) != nil {
				what := "file"
				if e.IsDir() {
					what = "directory"
				}
				out = append(out, Problem{Object: name, Kind: Stray,
					Detail: fmt.Sprintf("a %s no object name maps to (a partial copy, or left by hand); muster ignores it", what)})
				continue
			}
			switch {
			case e.IsDir():
				if err := walk(name); err != nil {
					return err
				}
			case !e.Type().IsRegular():
				out = append(out, Problem{Object: name, Kind: Stray,
					Detail: fmt.Sprintf("a %s, not a regular file; muster ignores it", typeName(e.Type()))})
			}
		}
		return nil
	}
	return out, walk("")
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
