package declaration

import (
	"sort"

	"github.com/muster-tool/muster/internal/resource"
)

// PackageEntry is a package resource as written in one place of the
// declaration: a role's or a node section's.
type PackageEntry struct {
	Name    string
	Version string // as declared: "", "present", "latest", "absent" or exact
	File    string
	Line    int
	// Key is the TOML key, such as role.web.package.labd.
	Key string
}

// Exact reports whether the entry asks for one exact version.
func (e PackageEntry) Exact() bool {
	switch e.Version {
	case "", "present", "latest", "absent":
		return false
	}
	return true
}

// Problem is a problem with the entry, at its place.
func (e PackageEntry) Problem(msg string) Problem {
	return Problem{File: e.File, Line: e.Line, Key: e.Key, Message: msg}
}

// Packages lists every package entry of the declaration, whatever nodes
// it reaches, in the order of their files and lines.
func (d *Declaration) Packages() []PackageEntry {
	var out []PackageEntry
	add := func(res []declared) {
		for i := range res {
			r := &res[i]
			if r.spec.Kind == resource.Package {
				out = append(out, PackageEntry{Name: r.spec.Name, Version: r.spec.Version, File: r.at.file, Line: r.at.line, Key: r.key})
			}
		}
	}
	for _, r := range d.roles {
		add(r.res)
	}
	for _, n := range d.nodes {
		add(n.res)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Key < out[j].Key
	})
	return out
}
