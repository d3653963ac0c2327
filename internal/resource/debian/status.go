package debian

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// statusQuery is one Installed call: the names asked for, grouped by bare
// package name so a stanza is matched with a single map lookup.
type statusQuery struct {
	// byName maps a bare package name to the names as asked ("nginx",
	// "libc6:amd64").
	byName map[string][]string
	found  map[string]string
}

func newStatusQuery(names []string) *statusQuery {
	q := &statusQuery{byName: make(map[string][]string, len(names)), found: make(map[string]string, len(names))}
	for _, n := range names {
		bare, _, _ := strings.Cut(n, ":")
		q.byName[bare] = append(q.byName[bare], n)
	}
	return q
}

// readStatus answers q from the dpkg database under admindir: the status
// file, then the update journal dpkg leaves in updates/ when it was
// interrupted before folding its changes back in (dpkg-query reads both,
// so a read-back must too).
func readStatus(admindir string, q *statusQuery) error {
	status := filepath.Join(admindir, "status")
	data, err := os.ReadFile(status)
	if err != nil {
		return fmt.Errorf("read dpkg status: %w", err)
	}
	q.scan(data)

	updates := filepath.Join(admindir, "updates")
	entries, err := os.ReadDir(updates)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read dpkg update journal: %w", err)
	}
	var journal []string
	for _, e := range entries {
		if isJournalName(e.Name()) {
			journal = append(journal, e.Name())
		}
	}
	// Journal entries are zero-padded sequence numbers: lexical order is
	// the order dpkg wrote them in.
	sort.Strings(journal)
	for _, name := range journal {
		data, err := os.ReadFile(filepath.Join(updates, name))
		if err != nil {
			return fmt.Errorf("read dpkg update journal: %w", err)
		}
		q.scan(data)
	}
	return nil
}

func isJournalName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var (
	fieldPackage = []byte("Package:")
	fieldStatus  = []byte("Status:")
	fieldVersion = []byte("Version:")
	fieldArch    = []byte("Architecture:")
	stanzaEnd    = []byte("\n\n")
)

// scan walks the stanzas of a status file. Most stanzas name a package
// nobody asked about, so each is skipped after one look at its Package
// field; only the few that match are parsed further. A later stanza for
// the same package (from the journal) overrides an earlier one.
func (q *statusQuery) scan(data []byte) {
	for len(data) > 0 {
		var stanza []byte
		if i := bytes.Index(data, stanzaEnd); i >= 0 {
			stanza, data = data[:i+1], data[i+2:]
		} else {
			stanza, data = data, nil
		}
		pkg := field(stanza, fieldPackage)
		if pkg == nil {
			continue
		}
		asked, ok := q.byName[string(pkg)]
		if !ok {
			continue
		}
		installed := isInstalled(field(stanza, fieldStatus))
		version := string(field(stanza, fieldVersion))
		arch := string(field(stanza, fieldArch))
		for _, name := range asked {
			if _, qual, ok := strings.Cut(name, ":"); ok && qual != arch {
				continue
			}
			if installed && version != "" {
				q.found[name] = version
			} else {
				delete(q.found, name)
			}
		}
	}
}

// isInstalled reports whether a Status value says the package's files are
// on the system and configured: flag "ok", state "installed". The wanted
// state (install, hold, deinstall, purge) is a selection, not a fact, so a
// held package counts as installed, and so does one merely selected for
// removal. Half-installed, unpacked, config-files and packages flagged
// reinst-required do not.
func isInstalled(status []byte) bool {
	f := bytes.Fields(status)
	return len(f) == 3 && string(f[1]) == "ok" && string(f[2]) == "installed"
}

// field returns the trimmed value of a single-line field in stanza, or nil.
// Field names only start a line: continuation lines begin with a space or
// tab, so a match at a line start is the field itself.
func field(stanza, name []byte) []byte {
	at := -1
	if bytes.HasPrefix(stanza, name) {
		at = 0
	} else {
		for off := 0; ; {
			i := bytes.Index(stanza[off:], name)
			if i < 0 {
				return nil
			}
			if stanza[off+i-1] == '\n' {
				at = off + i
				break
			}
			off += i + 1
		}
	}
	v := stanza[at+len(name):]
	if i := bytes.IndexByte(v, '\n'); i >= 0 {
		v = v[:i]
	}
	return bytes.TrimSpace(v)
}
