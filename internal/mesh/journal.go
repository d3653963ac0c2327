package mesh

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/muster-tool/muster/internal/fault"
)

// TokensJournal is the journal of the tokens this mesh directory issued.
const TokensJournal = "tokens.jsonl"

// A Journal is a file in the mesh directory that the mesh appends records
// to, one JSON object a line, and reads whole. It is a private copy of
// records the mesh also seals into the spool, for a command that needs
// many of them: the mesh directory is the mesh key's, mode 0700 (a
// directory others can enter is refused with the key), so what it holds
// is trusted as the key beside it is, and read without opening the sealed
// copy again. A line lost in a crash, or one that does not decode, is
// read from the spool instead, which is why Append does not sync: the
// spool's copy is the durable one.
//
// Its first line names the mesh whose directory wrote it, so that a
// journal from another mesh is refused rather than trusted.
type Journal struct {
	path string
	mesh string // fingerprint of the mesh's public keys
}

type journalHeader struct {
	Journal string `json:"journal"`
	Mesh    string `json:"mesh"`
}

// Journal returns the journal name in the mesh directory.
func (m *Mesh) Journal(name string) *Journal {
	return &Journal{path: filepath.Join(m.Dir, name), mesh: m.Public().Fingerprint()}
}

// Path is where the journal is kept.
func (j *Journal) Path() string { return j.path }

// Append adds v to the journal as one line. Appends from several
// processes at once are each whole: they take the file's lock in turn.
func (j *Journal) Append(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", j.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var buf []byte
	switch size := fi.Size(); {
	case size == 0:
		h, err := json.Marshal(journalHeader{Journal: filepath.Base(j.path), Mesh: j.mesh})
		if err != nil {
			return err
		}
		buf = append(h, '\n')
	default:
		// An append cut short by a crash leaves a line without its end:
		// end it, so that only that line is lost.
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, size-1); err != nil {
			return fmt.Errorf("read %s: %w", j.path, err)
		}
		if last[0] != '\n' {
			buf = append(buf, '\n')
		}
	}
	buf = append(append(buf, line...), '\n')
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("append to %s: %w", j.path, err)
	}
	return f.Close()
}

// Read calls fn with each line of the journal after its header, in the
// order they were appended; a journal not written yet has none. A journal
// another mesh wrote is refused, naming the file and what to do.
func (j *Journal) Read(fn func(line []byte)) error {
	data, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	var h journalHeader
	if err := json.Unmarshal(first, &h); err != nil || h.Mesh == "" {
		return fault.WithHint(fmt.Errorf("%s is corrupt: its first line does not name the mesh that wrote it", j.path),
			"move it away (mv "+j.path+" "+j.path+".bad): what it kept is read from the spool instead")
	}
	if h.Mesh != j.mesh {
		return fault.WithHint(fault.Refusedf("%s was written by mesh %s, not by this mesh %s (its keys were replaced, or the file comes from another mesh directory)", j.path, h.Mesh, j.mesh),
			"move it away (mv "+j.path+" "+j.path+".bad): what this mesh kept is read from the spool instead")
	}
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if len(line) > 0 {
			fn(line)
		}
	}
	return nil
}
