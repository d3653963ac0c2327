// Package host owns an enrolled host's own files: the host config (where the
// spool is, the node name, the state directory, briefing thresholds) and the
// state directory holding the host's key pair and the mesh keys it pinned at
// enrolment.
package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/muster-tool/muster/internal/tomlfile"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/keys"
)

// Config is the host config file (muster-config(5)).
type Config struct {
	// Spool is where the mesh's spool is (a directory or s3:// URL).
	Spool string `toml:"spool"`
	// Node is this host's node name.
	Node string `toml:"node"`
	// State is the state directory.
	State string `toml:"state"`
	// Root is the directory tree this host's resources are under, when
	// it is not / (an image being built): recorded by enrol join --root,
	// so that a forgotten --root never applies to / what was meant for
	// the tree.
	Root string `toml:"root,omitempty"`
	// Brief holds briefing thresholds.
	Brief BriefConfig `toml:"brief"`
	// Apt tunes the Debian package backend.
	Apt AptConfig `toml:"apt"`
	// Report sets when apply sends a report.
	Report ReportConfig `toml:"report,omitempty"`
}

// ReportConfig sets when apply sends a report.
type ReportConfig struct {
	// ContactInterval: a run with nothing new to report sends one only
	// when the last report sent is this old ("1h" when empty; "0s" sends
	// one every run). See Interval.
	ContactInterval string `toml:"contact_interval,omitempty"`
}

// DefaultContactInterval is ReportConfig.ContactInterval when unset.
const DefaultContactInterval = time.Hour

// Interval is the contact interval; ReadConfig has checked it.
func (r ReportConfig) Interval() time.Duration {
	if r.ContactInterval == "" {
		return DefaultContactInterval
	}
	d, _ := time.ParseDuration(r.ContactInterval)
	return d
}

// AptConfig tunes how apply drives apt.
type AptConfig struct {
	// Options are extra apt configuration items "Name=value", each given
	// to apt as -o (for example a sources list for the mesh's repository).
	Options []string `toml:"options,omitempty"`
	// Update runs apt-get update before installing.
	Update bool `toml:"update,omitempty"`
}

// BriefConfig sets the thresholds of briefing checks.
type BriefConfig struct {
	// MinFreeStateMB and MinFreeRootMB: below these, the free-space
	// lines fail. Defaults 64 and 256.
	MinFreeStateMB int64 `toml:"min_free_state_mb,omitempty"`
	MinFreeRootMB  int64 `toml:"min_free_root_mb,omitempty"`
}

// Defaults for BriefConfig.
const (
	DefaultMinFreeStateMB = 64
	DefaultMinFreeRootMB  = 256
)

// WithDefaults fills in unset thresholds.
func (b BriefConfig) WithDefaults() BriefConfig {
	if b.MinFreeStateMB == 0 {
		b.MinFreeStateMB = DefaultMinFreeStateMB
	}
	if b.MinFreeRootMB == 0 {
		b.MinFreeRootMB = DefaultMinFreeRootMB
	}
	return b
}

// LoadConfig reads and checks the host config file.
func LoadConfig(path string) (*Config, error) {
	c, err := ReadConfig(path)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fault.WithHint(fmt.Errorf("host config %s does not exist", path),
			"enrol this host first: muster enrol join --config "+path+" < token-file")
	}
	for _, f := range []struct{ key, val string }{{"spool", c.Spool}, {"node", c.Node}, {"state", c.State}} {
		if f.val == "" {
			return nil, fmt.Errorf("%s: missing key %q", path, f.key)
		}
	}
	return c, nil
}

// ReadConfig reads a host config file that may not be complete yet, such as
// one written ahead of enrolment to set briefing thresholds; join fills in
// the rest. A file that does not exist gives nil and no error.
func ReadConfig(path string) (*Config, error) {
	data, err := tomlfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, tomlfile.In(path, err)
	}
	var c Config
	if err := tomlfile.Decode(data, &c); err != nil {
		return nil, tomlfile.In(path, err)
	}
	if c.Brief.MinFreeStateMB < 0 || c.Brief.MinFreeRootMB < 0 {
		return nil, fmt.Errorf("%s: [brief] thresholds cannot be negative", path)
	}
	if v := c.Report.ContactInterval; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return nil, fault.WithHint(fmt.Errorf("%s: [report] contact_interval = %q is not a duration of 0s or more", path, v),
				`write it as Go durations are written, such as "1h" or "30m"; "0s" sends a report on every run`)
		}
	}
	return &c, nil
}

// WriteConfig writes the host config atomically.
func WriteConfig(path string, c *Config) error {
	data, err := tomlfile.Encode("# muster host config, written by muster enrol join; see muster-config(5)", c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o644)
}

// Identity is what a host holds in its state directory: its key pair, its
// node id, and the mesh keys it pinned.
type Identity struct {
	Node string
	Pair *keys.Pair
	Mesh keys.Public
}

// NodeID is the host's opaque id in the spool.
func (id *Identity) NodeID() string { return id.Pair.Public().Fingerprint() }

const pinnedFile = "mesh.pub"

// pinned is the on-disk form of the pinned mesh keys.
type pinned struct {
	Mesh keys.Public `toml:"mesh"`
}

// WriteIdentity stores a new identity in the state directory (keys 0600,
// directory 0700). It refuses to overwrite an existing identity.
func WriteIdentity(state string, pair *keys.Pair, mesh keys.Public) error {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(state, 0o700); err != nil {
		return err
	}
	if err := keys.Write(state, keyRole, pair); err != nil {
		return err
	}
	data, err := tomlfile.Encode("", pinned{Mesh: mesh})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(state, pinnedFile), data, 0o600)
}

// HasIdentity reports whether the state directory already holds a host
// identity.
func HasIdentity(state string) bool {
	if keys.Exists(state, keyRole) {
		return true
	}
	_, err := os.Stat(filepath.Join(state, pinnedFile))
	return err == nil
}

// joinFile records the token the host joined with, so that the host can
// find its own join request and the mesh's answer to it in the spool. It
// is a file of its own: an older muster reading the state directory
// ignores it, where a new key in mesh.pub would stop it.
const joinFile = "join.toml"

type joinRecord struct {
	TokenID string `toml:"token_id"`
}

// WriteJoin records the token the host joined with.
func WriteJoin(state, tokenID string) error {
	data, err := tomlfile.Encode("", joinRecord{TokenID: tokenID})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(state, joinFile), data, 0o600)
}

// ReadJoin returns the token the host joined with, or "" for a host that
// joined before join recorded it. Only messages depend on it, so apply
// reads it only when it has nothing to apply, not on every run.
func ReadJoin(state string) (string, error) {
	path := filepath.Join(state, joinFile)
	data, err := tomlfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	var j joinRecord
	if err == nil {
		err = tomlfile.Decode(data, &j)
	}
	if err != nil {
		return "", fmt.Errorf("join record %s: %v", path, err)
	}
	return j.TokenID, nil
}

// StateFile and LedgerFile are the state apply keeps in the state
// directory, authenticated under the host's key (see internal/apply), so
// they belong to the identity that wrote them.
const (
	StateFile  = "state.toml"
	LedgerFile = "ledger.tsv"
)

// identityFiles are the files of a host identity in the state directory,
// and the state kept under its key: a new identity replaces them all, and
// starts without state (the mesh's recovery copy tells it what the
// identity it replaced owned).
var identityFiles = append(keys.FileNames(keyRole), pinnedFile, joinFile, StateFile, LedgerFile)

// RemoveIdentity deletes the identity files (cleanup after a failed join).
func RemoveIdentity(state string) error {
	for _, f := range identityFiles {
		if err := os.Remove(filepath.Join(state, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SetIdentityAside moves the identity in the state directory out of the
// way for join --force, so that a join that fails can put it back instead
// of leaving the host with no identity at all. Restore puts it back;
// discard deletes it once the new identity is in place.
func SetIdentityAside(state string) (restore, discard func() error, err error) {
	var moved []string
	restore = func() error {
		for _, f := range moved {
			p := filepath.Join(state, f)
			if err := os.Rename(p+asideSuffix, p); err != nil {
				return err
			}
		}
		return atomicfile.SyncDir(state)
	}
	discard = func() error {
		for _, f := range moved {
			if err := os.Remove(filepath.Join(state, f+asideSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	for _, f := range identityFiles {
		p := filepath.Join(state, f)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Rename(p, p+asideSuffix); err != nil {
			restore()
			return nil, nil, err
		}
		moved = append(moved, f)
	}
	return restore, discard, nil
}

const asideSuffix = ".replaced"

// keyRole names the host's key files in the state directory.
const keyRole = "host"

// KeepPublicKey keeps the public half of the signing key of id, which
// LoadIdentity read with c, beside the key when LoadIdentity had to derive
// it (keys.KeepPublic): a command that writes to the state directory
// anyway calls it, so that the next run need not derive it.
func KeepPublicKey(c *Config, id *Identity) error {
	return keys.KeepPublic(c.State, keyRole, id.Pair)
}

// LoadIdentity reads the identity from the state directory named in c.
func LoadIdentity(c *Config) (*Identity, error) {
	pair, err := keys.Load(c.State, keyRole)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fault.WithHint(err, "this host is not enrolled: muster enrol join")
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, fault.WithHint(fmt.Errorf("this host's identity in %s cannot be read: permission denied", c.State),
			"run muster as root: the state directory and the keys in it are root's alone")
	}
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.State, pinnedFile)
	var p pinned
	data, err := tomlfile.ReadFile(path)
	if err == nil {
		err = tomlfile.Decode(data, &p)
	}
	if err != nil {
		return nil, fmt.Errorf("pinned mesh keys %s: %v", path, err)
	}
	if err := p.Mesh.Check(); err != nil {
		return nil, fmt.Errorf("pinned mesh keys %s: %v", path, err)
	}
	return &Identity{Node: c.Node, Pair: pair, Mesh: p.Mesh}, nil
}
