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

// Services is an init-system backend (systemd).
type Services interface {
	// Units reads the state of units, one UnitState each in the order
	// given, in as few queries as the backend can make it. An error fails
	// them all; a unit that cannot be read (one systemd does not know)
	// has its own UnitState.Err.
	Units(ctx context.Context, units []string) ([]UnitState, error)
	// Look is Units for deciding what to change, and may take
	// enablement from what the init system already holds instead of
	// reading the unit files again (systemd's UnitFileState, which a
	// link made or removed by hand leaves stale until the next reload).
	// Only Units reads a line back; a unit whose read-back contradicts
	// its look is changed then, and read back again.
	Look(ctx context.Context, units []string) ([]UnitState, error)
	SetEnabled(ctx context.Context, unit string, enabled bool) error
	// CanRun reports whether units can be started here (false under a
	// --root other than /, or where systemd is not running); when false,
	// SetRunning, Restart and Reload are not called, and Units reads only
	// enablement.
	CanRun() bool
	SetRunning(ctx context.Context, unit string, running bool) error
	Restart(ctx context.Context, unit string) error
	// Reload makes the init system read every unit file again
	// (systemctl daemon-reload).
	Reload(ctx context.Context) error
	// UnitFile reports whether path (absolute, below the root) is a unit
	// file, or in a drop-in directory, that the init system reads: a
	// change to it takes effect only after Reload.
	UnitFile(path string) bool
}

// UnitState is what Services.Units read of one unit.
type UnitState struct {
	// Enabled, by the init system's own definition (systemctl
	// is-enabled).
	Enabled bool
	// Active (running, or reloading while running) and Stale are read
	// only where units can run. Stale: the init system runs an older
	// definition of the unit than its files on disk hold (systemd's
	// NeedDaemonReload), so what runs is not what is declared.
	Active, Stale bool
	// Err: this unit could not be read.
	Err error
}

// PackageFiles is a Packages backend that can tell, without installing
// anything, what a package would install. A dry run asks it about the
// packages the run would install, so that a service whose unit one of
// them brings is shown as what the run would do, not as a unit not found.
type PackageFiles interface {
	// Files lists the absolute paths package name at version ("" for
	// the candidate) would install; ok is false when that cannot be
	// told without downloading the package.
	Files(ctx context.Context, name, version string) (paths []string, ok bool, err error)
}

// VersionOrder is a Packages backend that orders versions by its package
// manager's rules, so that a dry run can say upgrade or downgrade.
type VersionOrder interface {
	// CompareVersions returns -1, 0 or 1 as a is older than, the same
	// as, or newer than b.
	CompareVersions(ctx context.Context, a, b string) (int, error)
}
