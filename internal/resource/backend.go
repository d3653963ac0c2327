package resource

import "context"

// Packages is a package manager backend. The Debian one (dpkg/apt) lives in
// internal/resource/debian; the interface leaves room for dnf/rpm and apk.
// Every method acts inside the backend's root (see its constructor).
type Packages interface {
	// Installed returns the installed version of each name that is
	// installed, in one query for all names. Names not installed are
	// absent from the map.
	Installed(ctx context.Context, names []string) (map[string]string, error)
	// Candidate returns the version an install of name would pick now
	// (for version = "latest"), or an error naming the package.
	Candidate(ctx context.Context, name string) (string, error)
	// Install installs each package at the given version ("" = whatever
	// the repository offers). A failure returns an error carrying the
	// package manager's own message.
	Install(ctx context.Context, want map[string]string) error
	// Remove removes the named packages.
	Remove(ctx context.Context, names []string) error
}

// Services is an init-system backend (systemd, via systemctl).
type Services interface {
	IsEnabled(ctx context.Context, unit string) (bool, error)
	SetEnabled(ctx context.Context, unit string, enabled bool) error
	// CanRun reports whether units can be started here (false under a
	// --root other than /, or where systemd is not running); when false,
	// IsActive, SetRunning and Restart are not called.
	CanRun() bool
	IsActive(ctx context.Context, unit string) (bool, error)
	SetRunning(ctx context.Context, unit string, running bool) error
	Restart(ctx context.Context, unit string) error
}
