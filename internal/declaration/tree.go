package declaration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// Any bytes, whole trees: a file's `source` may be any file up to
// resource.MaxContent, carried as text or, when it is not UTF-8, as base64
// (resource.Spec.EncodeContent); and a tree resource is a directory of the
// declaration's repository, read by declare and declared as the directory,
// files and symlinks in it, each a resource of its own, so that every one
// is applied and read back like any other, and one the tree no longer has
// is an orphan like any other.

// treeKind is the declaration's tree: not a resource type of its own, but
// the resources it holds.
const treeKind resource.Kind = "tree"

// MaxTreeContent bounds the bytes of all the files of one tree, and
// MaxTreeEntries the files, directories and symlinks in it: a tree
// travels whole in the declaration bundle of every node it is declared
// for, which holds at most 64 MiB.
const (
	MaxTreeContent = 32 << 20
	MaxTreeEntries = 20000
)

// readFileSource reads a file's `source =` into spec: its bytes as they
// are, as text or as base64.
func (s *settings) readFileSource(src string, spec *resource.Spec) {
	sf, ok := s.source(src)
	if !ok {
		return
	}
	spec.Content, spec.Encoding = sf.content, ""
	if !sf.text {
		spec.Encoding = "base64"
	}
}

// overCap is the problem of a source file over resource.MaxContent.
func overCap(display string, size int64) string {
	return fmt.Sprintf("source file %q is %d bytes, over the %d MiB (%d bytes) cap on a file's content", display, size, resource.MaxContent>>20, resource.MaxContent)
}

// tree reads one [role.NAME.tree."PATH"] table and declares what it holds:
// the directory at PATH, and below it every directory, file and symlink of
// the source directory.
func (fp *fileParser) tree(name string, key []string, t map[string]any, by string, byID map[string]declared) {
	s := &settings{fp: fp, key: key, t: t, ok: true, reported: map[string]bool{}}
	s.only(treeKind, "source", "file_mode", "directory_mode", "owner", "group", "special_bits", "purge", "order")
	root := resource.Spec{Kind: resource.Directory, Path: name, State: "present"}
	s.ownership(&root)
	modes := map[string]string{}
	for _, k := range []string{"file_mode", "directory_mode"} {
		if v, ok := t[k]; ok {
			m, isStr := v.(string)
			if !isStr {
				s.errorf(k, "must be a string of 3 or 4 octal digits, such as \"0644\", not %s", tomlfile.TypeName(v))
				continue
			}
			modes[k] = m
		}
	}
	if b, ok := s.boolean("purge"); ok {
		root.Purge = *b
	}
	if v, ok := t["order"]; ok {
		if n, isInt := v.(int64); isInt {
			root.Order = int(n)
		} else {
			s.errorf("order", "must be an integer, not %s", tomlfile.TypeName(v))
		}
	}
	src, hasSource := s.str("source")
	if !hasSource && !s.has("source") {
		s.errorf("", "a tree needs source, the directory to copy, such as source = \"site/\"")
	}
	// The root's own settings are checked first, so a bad mode is
	// reported once, at its key, not once per file.
	for _, k := range []string{"file_mode", "directory_mode"} {
		if m, ok := modes[k]; ok {
			probe := root
			probe.Mode, probe.Purge = m, false
			for _, bad := range resource.Check(&probe) {
				if bad.Field == "mode" {
					s.errorf(k, "%s", bad.Reason)
				}
			}
		}
	}
	for _, bad := range resource.Check(&root) {
		if !s.reported[bad.Field] {
			s.errorf(bad.Field, "%s", bad.Reason)
		}
	}
	if !s.ok || !hasSource {
		return
	}
	entries, err := fp.readTree(src)
	if err != "" {
		s.errorf("source", "%s", err)
		return
	}
	specs := make([]resource.Spec, 0, len(entries))
	for _, e := range entries {
		spec := resource.Spec{Path: name, State: "present", Owner: root.Owner, Group: root.Group, SpecialBits: root.SpecialBits, Order: root.Order}
		if e.rel != "" {
			spec.Path = path.Join(name, e.rel)
		}
		switch e.kind {
		case resource.Directory:
			spec.Kind, spec.Mode = resource.Directory, orMode(modes["directory_mode"], e.mode)
			spec.Purge = e.rel == "" && root.Purge
		case resource.File:
			spec.Kind, spec.Mode = resource.File, orMode(modes["file_mode"], e.mode)
			spec.Content, spec.Encoding = e.content, e.encoding
		case resource.Symlink:
			spec.Kind, spec.Target = resource.Symlink, e.target
			spec.Owner, spec.Group, spec.SpecialBits = "", "", false
		}
		if len(spec.Mode) == 3 {
			spec.Mode = "0" + spec.Mode
		}
		if bad := resource.Check(&spec); len(bad) > 0 {
			where := filepath.Join(src, e.rel)
			s.errorf("source", "%s in the tree (%s): %s", spec.ID(), where, bad[0])
			continue
		}
		specs = append(specs, spec)
	}
	if !s.ok {
		return
	}
	for _, spec := range specs {
		fp.declare(key, spec, nil, by, byID)
	}
}

func orMode(given, source string) string {
	if given != "" {
		return given
	}
	return source
}

// treeEntry is one thing in a tree's source directory; rel is "" for the
// directory itself.
type treeEntry struct {
	rel      string
	kind     resource.Kind
	mode     string // from the source, as 4 octal digits
	content  string // as a Spec carries it (resource.Spec.EncodeContent)
	encoding string
	target   string
}

// readTree reads a tree's source directory, relative to the declaration
// file's directory, once however many trees name it. It returns what is in
// it, the directory itself first and then in lexical order, or a problem.
func (fp *fileParser) readTree(src string) ([]treeEntry, string) {
	p := src
	if !filepath.IsAbs(p) {
		p = filepath.Join(fp.src.Dir, p)
	}
	p = filepath.Clean(p)
	if fp.trees == nil {
		fp.trees = map[string]treeSource{}
	}
	if ts, ok := fp.trees[p]; ok {
		return ts.entries, ts.err
	}
	entries, err := loadTree(p, src)
	fp.trees[p] = treeSource{entries, err}
	return entries, err
}

type treeSource struct {
	entries []treeEntry
	err     string
}

func loadTree(p, display string) ([]treeEntry, string) {
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("source directory %q does not exist (relative paths start at the declaration file's directory)", display)
	case err != nil:
		return nil, fmt.Sprintf("cannot read source directory %q: %v", display, errors.Unwrap(err))
	case !info.IsDir():
		return nil, fmt.Sprintf("source %q is not a directory; declare one file as a file resource", display)
	}
	var out []treeEntry
	total := int64(0)
	var problem string
	err = filepath.WalkDir(p, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(p, full)
		if rel == "." {
			rel = ""
		}
		shown := filepath.Join(display, rel)
		if len(out) == MaxTreeEntries {
			problem = fmt.Sprintf("source directory %q holds more than %d files, directories and symlinks, the cap on a tree", display, MaxTreeEntries)
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if rel == "" {
			// The source named itself, maybe through a symlink.
			info, err = os.Stat(full)
			if err != nil {
				return err
			}
		}
		e := treeEntry{rel: filepath.ToSlash(rel), mode: fmt.Sprintf("%04o", atomicfile.UnixMode(info.Mode()))}
		switch {
		case info.IsDir():
			e.kind = resource.Directory
		case info.Mode().IsRegular():
			e.kind = resource.File
			if info.Size() > resource.MaxContent {
				problem = overCap(shown, info.Size())
				return filepath.SkipAll
			}
			if total += info.Size(); total > MaxTreeContent {
				problem = fmt.Sprintf("the files of source directory %q add up to more than %d MiB (%d bytes), the cap on a tree", display, MaxTreeContent>>20, MaxTreeContent)
				return filepath.SkipAll
			}
			data, err := os.ReadFile(full)
			if err != nil {
				return err
			}
			var spec resource.Spec
			spec.EncodeContent(data)
			e.content, e.encoding = spec.Content, spec.Encoding
		case info.Mode()&fs.ModeSymlink != 0:
			e.kind = resource.Symlink
			if e.target, err = os.Readlink(full); err != nil {
				return err
			}
		default:
			problem = fmt.Sprintf("%q is a %s; a tree holds files, directories and symbolic links", shown, typeOfMode(info.Mode()))
			return filepath.SkipAll
		}
		out = append(out, e)
		return nil
	})
	if problem != "" {
		return nil, problem
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			rel, _ := filepath.Rel(p, pe.Path)
			return nil, fmt.Sprintf("cannot read %q: %v", filepath.Join(display, rel), pe.Err)
		}
		return nil, fmt.Sprintf("cannot read source directory %q: %v", display, err)
	}
	return out, ""
}

func typeOfMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return strings.TrimPrefix(m.Type().String(), "-")
}
