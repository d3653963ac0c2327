// Package brief owns briefings: the structured document a host sends when it
// joins (and whenever asked) saying whether it can do the work. A briefing is
// a list of lines (check id, status, detail); whether the node is eligible
// is computed from those lines by outcome.Of and never stored beside them.
package brief

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// FormatVersion is the version of the briefing document.
const FormatVersion = 1

// Briefing is the document. It deliberately has no outcome field: a
// document that carries one is refused on decode (unknown key).
type Briefing struct {
	Version int            `toml:"version" json:"version"`
	Node    string         `toml:"node" json:"node"`
	Time    time.Time      `toml:"time" json:"time"`
	Muster  string         `toml:"muster" json:"muster"`
	Lines   []outcome.Line `toml:"line" json:"lines"`
	// Facts describe the host, for the declaration's templates; nil in a
	// briefing from a muster older than facts.
	Facts *Facts `toml:"facts,omitempty" json:"facts"`
}

// Outcome is computed from the lines: passed means eligible.
func (b *Briefing) Outcome() outcome.Outcome { return outcome.Of(b.Lines) }

// Eligible reports whether no line failed.
func (b *Briefing) Eligible() bool { return b.Outcome() == outcome.Passed }

// Check validates a decoded briefing.
func (b *Briefing) Check() error {
	if b.Version != FormatVersion {
		return fmt.Errorf("briefing format version %d, want %d", b.Version, FormatVersion)
	}
	if len(b.Lines) == 0 {
		return fmt.Errorf("briefing has no lines")
	}
	return outcome.Check(b.Lines)
}

// Env is what the checks look at.
type Env struct {
	Node  string
	Root  string // "/" or a directory everything is applied in
	State string
	Spool spool.Spool
	// SpoolReached: the caller has just read the spool (apply), so the
	// spool line need not ask it again.
	SpoolReached   bool
	MeshCreated    time.Time // from the spool's mesh keys; zero if unknown
	MinFreeStateMB int64
	MinFreeRootMB  int64
	Version        string
	Now            time.Time
}

// Run performs every check and returns the briefing.
func Run(ctx context.Context, e Env) *Briefing {
	root := e.Root
	if root == "" {
		root = "/"
	}
	b := &Briefing{Version: FormatVersion, Node: e.Node, Time: e.Now.UTC().Truncate(time.Second), Muster: e.Version}
	add := func(id string, s outcome.Status, format string, args ...any) {
		b.Lines = append(b.Lines, outcome.Line{ID: id, Status: s, Detail: fmt.Sprintf(format, args...)})
	}
	// os: the file is read once, for this line and the facts.
	rel := osReleaseFields(filepath.Join(root, "etc", "os-release"))
	if name := rel["PRETTY_NAME"]; name != "" {
		add("os", outcome.OK, "%s", name)
	} else {
		add("os", outcome.Warn, "no readable etc/os-release under %s", root)
	}
	add("arch", outcome.OK, "%s", runtime.GOARCH)
	// package manager
	status := filepath.Join(root, "var", "lib", "dpkg", "status")
	if _, err := exec.LookPath("dpkg"); err != nil {
		add("package-manager", outcome.Failed, "no supported package manager: dpkg not found on PATH")
	} else if f, err := os.Open(status); err != nil {
		add("package-manager", outcome.Failed, "dpkg status %s is not readable: %v", status, unwrapPath(err))
	} else {
		f.Close()
		add("package-manager", outcome.OK, "dpkg (%s)", status)
	}
	// init system
	switch {
	case root == "/" && isDir("/run/systemd/system"):
		add("init", outcome.OK, "systemd (running)")
	case lookPath("systemctl"):
		add("init", outcome.OK, "systemd (not running here: services are enabled with systemctl --root, not started)")
	default:
		add("init", outcome.Warn, "no systemd: service resources cannot be applied")
	}
	// free space
	freeLine := func(id, path string, minMB int64) {
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil {
			add(id, outcome.Failed, "cannot read free space of %s: %v", path, err)
			return
		}
		free := int64(st.Bavail) * int64(st.Bsize) >> 20
		if free < minMB {
			add(id, outcome.Failed, "%d MiB free on %s, below the threshold of %d MiB", free, path, minMB)
			return
		}
		add(id, outcome.OK, "%d MiB free on %s (threshold %d MiB)", free, path, minMB)
	}
	freeLine("free-state", e.State, e.MinFreeStateMB)
	freeLine("free-root", root, e.MinFreeRootMB)
	// clock
	switch {
	case !e.MeshCreated.IsZero() && e.Now.Before(e.MeshCreated.Add(-5*time.Minute)):
		add("clock", outcome.Failed, "clock says %s, before the mesh was created (%s)", e.Now.UTC().Format(time.RFC3339), e.MeshCreated.UTC().Format(time.RFC3339))
	case e.Now.Year() >= 2100:
		add("clock", outcome.Failed, "clock says %s", e.Now.UTC().Format(time.RFC3339))
	default:
		add("clock", outcome.OK, "%s", e.Now.UTC().Format(time.RFC3339))
	}
	// spool
	if e.Spool == nil {
		add("spool", outcome.Failed, "no spool configured")
	} else if e.SpoolReached {
		add("spool", outcome.OK, "%s reached", e.Spool)
	} else if _, err := e.Spool.Stat(ctx, spool.MeshKeysName); err != nil {
		add("spool", outcome.Failed, "spool %s is not readable: %v", e.Spool, err)
	} else if err := writable(e.Spool); err != nil {
		add("spool", outcome.Failed, "spool %s is not writable: %v", e.Spool, err)
	} else {
		add("spool", outcome.OK, "%s readable and writable", e.Spool)
	}
	add("muster", outcome.OK, "%s", e.Version)
	b.Facts = gatherFacts(root, rel)
	return b
}

func writable(sp spool.Spool) error {
	if d, ok := sp.(interface{ Path() string }); ok {
		return unix.Access(d.Path(), unix.W_OK)
	}
	return nil
}

// osReleaseFields reads the KEY=value lines of an os-release file, values
// unquoted; nil if it cannot be read.
func osReleaseFields(path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			out[k] = strings.Trim(v, `"'`)
		}
	}
	return out
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func lookPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
