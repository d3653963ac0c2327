// Package resource owns what muster manages on a host: the declared form of
// each resource (Spec), how to change the system towards it, and how to read
// it back. A line becomes ok only through ReadBack matching the Spec.
package resource

import (
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Kind is a resource type.
type Kind string

// The resource types a declaration may use.
const (
	File      Kind = "file"
	Directory Kind = "directory"
	Symlink   Kind = "symlink"
	Package   Kind = "package"
	Service   Kind = "service"
	User      Kind = "user"
	Group     Kind = "group"
)

// HasPath reports whether resources of the kind are named by a path (file,
// directory, symlink) rather than by a name.
func (k Kind) HasPath() bool { return isPath(k) }

// Spec is one resolved resource as it travels in a node's declaration
// bundle. Fields that do not apply to a kind are empty.
type Spec struct {
	Kind Kind `toml:"type"`
	// Path is the absolute path of a file, directory or symlink.
	Path string `toml:"path,omitempty"`
	// Name is the package or systemd unit name.
	Name string `toml:"name,omitempty"`

	// State is "present" (default) or "absent" for files, directories
	// and symlinks.
	State string `toml:"state,omitempty"`
	// Content is a file's full content (a declaration's `source` is read
	// at declare time and carried here), as Encoding says; Bytes decodes
	// it.
	Content string `toml:"content,omitempty"`
	// Encoding is "" for content that is UTF-8 text, carried as it is,
	// or "base64" for any other bytes, carried as standard padded base64
	// (a bundle's TOML holds only text). Left out of JSON when empty, so
	// the digest declare keeps of a text file is the one it had before
	// the setting existed.
	Encoding string `toml:"encoding,omitempty" json:",omitempty"`
	// Secret marks content that must never appear in output, diffs, logs
	// or reports; only its digest may.
	Secret bool `toml:"secret,omitempty"`
	// Mode is an octal permission string such as "0644"; empty leaves
	// the mode as created (0644 files, 0755 directories).
	Mode string `toml:"mode,omitempty"`
	// SpecialBits allows Mode to set the setuid, setgid or sticky bit;
	// without it such a mode is refused (see Check). Left out of JSON
	// when false, like ReplaceSymlink, so the digest declare keeps of a
	// spec without it is the one it had before the setting existed.
	SpecialBits bool `toml:"special_bits,omitempty" json:",omitempty"`
	// Owner and Group are names or numeric ids; empty leaves them as is.
	// For a user, Group is its primary group.
	Owner string `toml:"owner,omitempty"`
	Group string `toml:"group,omitempty"`
	// ReplaceSymlink lets a file or directory replace a symlink at its
	// path that the host does not own; without it that line fails. A
	// symlink the host owns is replaced either way.
	ReplaceSymlink bool `toml:"replace_symlink,omitempty" json:",omitempty"`
	// Target is a symlink's target.
	Target string `toml:"target,omitempty"`

	// Validate is a command that checks a file's new content before it
	// replaces the old one: its words, one of which holds "%s", which
	// stands for the path of the staged temp file (see validate.go).
	// With ValidateShell it is one string, run by /bin/sh -c.
	Validate      []string `toml:"validate,omitempty" json:",omitempty"`
	ValidateShell bool     `toml:"validate_shell,omitempty" json:",omitempty"`
	// Purge, on a directory: what is below it that no spec of the
	// declaration names and the host does not own is removed (see
	// purge.go).
	Purge bool `toml:"purge,omitempty" json:",omitempty"`

	// Version of a package: an exact version, "present", "latest" or
	// "absent".
	Version string `toml:"version,omitempty"`

	// Enabled and Running of a service; nil leaves that aspect alone.
	Enabled *bool `toml:"enabled,omitempty"`
	Running *bool `toml:"running,omitempty"`
	// RestartOn lists file paths; when apply changes one of them, the
	// service is restarted.
	RestartOn []string `toml:"restart_on,omitempty"`

	// UID of a user and GID of a group; nil lets useradd or groupadd
	// pick one and leaves it alone after.
	UID *int `toml:"uid,omitempty" json:",omitempty"`
	GID *int `toml:"gid,omitempty" json:",omitempty"`
	// Groups are a user's supplementary groups, by name: the user is in
	// exactly these. Nil leaves them alone.
	Groups []string `toml:"groups,omitempty" json:",omitempty"`
	// Home and Shell of a user; empty leaves them as useradd makes them.
	Home  string `toml:"home,omitempty" json:",omitempty"`
	Shell string `toml:"shell,omitempty" json:",omitempty"`
	// System makes a user or group a system account when it is created.
	System bool `toml:"system,omitempty" json:",omitempty"`

	// Order overrides the default order (packages, then groups and
	// users, then files, directories and symlinks, then services): lower
	// runs first; 0 means the default for the kind.
	Order int `toml:"order,omitempty"`
}

// ID is the resource's identity: type and path or name, such as
// "file:/etc/motd" or "package:nginx". Two specs with one ID for one node
// are the same resource.
func (s Spec) ID() string {
	if isPath(s.Kind) {
		return string(s.Kind) + ":" + s.Path
	}
	return string(s.Kind) + ":" + s.Name
}

// Bytes returns a file's content as bytes (in a string), decoded as
// Encoding says. Text content is returned as it is, without a copy.
func (s *Spec) Bytes() (string, error) {
	switch s.Encoding {
	case "":
		return s.Content, nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(s.Content)
		if err != nil {
			return "", errors.New("content is not valid base64")
		}
		return string(b), nil
	}
	return "", fmt.Errorf("encoding %q is not one muster knows (want \"base64\", or none for text)", s.Encoding)
}

// EncodeContent sets a file's Content to data: as it is when it is UTF-8
// text, as base64 otherwise.
func (s *Spec) EncodeContent(data []byte) {
	if utf8.Valid(data) {
		s.Content, s.Encoding = string(data), ""
		return
	}
	s.Content, s.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
}
