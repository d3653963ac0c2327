package mesh

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// HeadFile is the file in the mesh directory that remembers the newest
// generation this mesh committed.
const HeadFile = "history.toml"

// Head is the newest commit a mesh directory made: its generation and the
// digest of the commit object. declare refuses a spool whose history does
// not reach it, so a spool restored from an older copy, or another copy
// that grew apart, is never declared on as if it were the whole history.
type Head struct {
	Generation  uint64    `toml:"generation"`
	Commit      string    `toml:"commit"`
	CommittedAt time.Time `toml:"committed_at"`
}

// HeadPath is where the mesh in dir keeps its head.
func HeadPath(dir string) string { return filepath.Join(dir, HeadFile) }

// Head returns the newest commit this mesh directory made, or nil if it
// has made none (or was created before muster remembered it).
func (m *Mesh) Head() (*Head, error) {
	path := HeadPath(m.Dir)
	data, err := tomlfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, tomlfile.In(path, err)
	}
	var h Head
	err = tomlfile.Decode(data, &h)
	if err == nil && (h.Generation == 0 || h.Commit == "") {
		err = errors.New("no generation or commit")
	}
	if err != nil {
		return nil, fault.WithHint(fmt.Errorf("%s is corrupt: %v", path, err),
			"it remembers the newest generation this mesh committed; move it away (mv "+path+" "+path+".bad) to accept the spool's history as it is")
	}
	return &h, nil
}

// RecordHead remembers h as the newest commit, unless the file already
// names a newer one (another declare from this directory got there
// first).
func (m *Mesh) RecordHead(h Head) error {
	lock, err := os.OpenFile(filepath.Join(m.Dir, "history.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	cur, err := m.Head()
	if err == nil && cur != nil && cur.Generation >= h.Generation {
		return nil
	}
	h.CommittedAt = h.CommittedAt.UTC()
	data, err := tomlfile.Encode("# muster mesh history: the newest generation this mesh committed; see muster-declare(1)", h)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(HeadPath(m.Dir), data, 0o600)
}
