// Package resource owns what muster manages on a host: the declared form of
// each resource (Spec), how to change the system towards it, and how to read
// it back. A line becomes ok only through ReadBack matching the Spec.
package resource

// Kind is a resource type.
type Kind string

// The resource types a declaration may use.
const (
	File      Kind = "file"
	Directory Kind = "directory"
	Symlink   Kind = "symlink"
	Package   Kind = "package"
	Service   Kind = "service"
)

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
	// at declare time and carried here).
	Content string `toml:"content,omitempty"`
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
	Owner string `toml:"owner,omitempty"`
	Group string `toml:"group,omitempty"`
	// ReplaceSymlink lets a file or directory replace a symlink at its
	// path that the host does not own; without it that line fails. A
	// symlink the host owns is replaced either way.
	ReplaceSymlink bool `toml:"replace_symlink,omitempty" json:",omitempty"`
	// Target is a symlink's target.
	Target string `toml:"target,omitempty"`

	// Version of a package: an exact version, "present", "latest" or
	// "absent".
	Version string `toml:"version,omitempty"`

	// Enabled and Running of a service; nil leaves that aspect alone.
	Enabled *bool `toml:"enabled,omitempty"`
	Running *bool `toml:"running,omitempty"`
	// RestartOn lists file paths; when apply changes one of them, the
	// service is restarted.
	RestartOn []string `toml:"restart_on,omitempty"`

	// Order overrides the default order (packages, then files,
	// directories and symlinks, then services): lower runs first; 0 means
	// the default for the kind.
	Order int `toml:"order,omitempty"`
}

// ID is the resource's identity: type and path or name, such as
// "file:/etc/motd" or "package:nginx". Two specs with one ID for one node
// are the same resource.
func (s Spec) ID() string {
	if s.Kind == Package || s.Kind == Service {
		return string(s.Kind) + ":" + s.Name
	}
	return string(s.Kind) + ":" + s.Path
}
