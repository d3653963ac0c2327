package apply

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/tomlfile"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/upgrade"
	"github.com/muster-tool/muster/spool"
)

// State is what a host remembers between applies, in state.toml. It is
// written atomically; a file that exists but cannot be read fails closed:
// resetting it to generation 0 would reopen rollback.
type State struct {
	Version int `toml:"version"`
	// Generation is the newest generation this host applied (whatever
	// the outcome): a bundle older than this is a rollback.
	Generation uint64 `toml:"generation"`
	Run        string `toml:"run"`
	// Commit is the digest of the commit of Generation this host applied:
	// another commit of that generation, or a newer one whose history does
	// not hold this one, is a fork and refused.
	Commit string `toml:"commit,omitempty"`
	// CommitETag and CommitObject are the store's tag of that commit's
	// object as the spool's listing showed it (S3's ETag; empty for a
	// directory) and the object's bytes, base64: a run whose listing
	// shows the same tag verifies these bytes again instead of reading
	// the object (see generation.LoadHistoryFrom).
	CommitETag   string `toml:"commit_etag,omitempty"`
	CommitObject string `toml:"commit_object,omitempty"`
	// AppliedAt is when this host first applied Generation. Later runs
	// of the same generation do not rewrite the file.
	AppliedAt time.Time `toml:"applied_at"`
	// Briefing is the gist (brief.Briefing.Gist) of the newest briefing
	// this host sent from apply: another is sent when it changes.
	Briefing string `toml:"briefing,omitempty"`
	// FailedVersions are muster versions that failed here (their
	// self-check, or to start); they are not installed again until a
	// newer one is declared (see internal/upgrade).
	FailedVersions upgrade.Failed `toml:"failed_version,omitempty"`
}

// applied reports whether c is the commit of st.Generation this host
// applied. State written before commits had digests names the run.
func (st *State) applied(c *generation.Commit) bool {
	if st.Commit != "" {
		return c.Digest == st.Commit
	}
	return st.Run == "" || c.Run == st.Run
}

// known is the commit this host applied as generation.LoadHistoryFrom
// takes it, or nil when the state names none. Its bytes and tag are kept
// only on a store with tags, and only when they are the commit applied.
// The state is authenticated under this host's key, so its digest is one
// this host verified.
func (st *State) known() *generation.Known {
	if st.Commit == "" {
		return nil
	}
	k := &generation.Known{Generation: st.Generation, Digest: st.Commit}
	if st.CommitETag != "" {
		data, err := base64.StdEncoding.DecodeString(st.CommitObject)
		if err == nil && generation.Digest(data) == st.Commit {
			k.ETag, k.Data = st.CommitETag, data
		}
	}
	return k
}

// keepCommit records c, listed with tag etag, as the commit applied; it
// reports whether that changed the state.
func (st *State) keepCommit(c *generation.Commit, etag string) bool {
	obj := ""
	if etag != "" {
		obj = base64.StdEncoding.EncodeToString(c.Data)
	}
	if st.Generation == c.Generation && st.Run == c.Run && st.Commit == c.Digest && st.CommitETag == etag && st.CommitObject == obj {
		return false
	}
	st.Generation, st.Run, st.Commit, st.CommitETag, st.CommitObject = c.Generation, c.Run, c.Digest, etag, obj
	return true
}

// commitName names the commit this host applied, for messages.
func (st *State) commitName() string {
	if st.Commit != "" {
		return generation.ShortDigest(st.Commit)
	}
	return "run " + st.Run
}

const (
	stateFile  = host.StateFile
	ledgerFile = host.LedgerFile
	outboxDir  = "outbox"
	lockFile   = "apply.lock"
	// stagingFile exists, durably, from before a run creates its first temp
	// file beside a declared path until that run ends: found at the start
	// of a run, it says the last one was killed and may have left temp
	// files there, which this run removes (resource.System.SweepTemps).
	stagingFile = "staging"
)

const stateVersion = 1

// recoverHint is the documented way out of a corrupt state file.
func recoverHint(path string) string {
	return "if the file cannot be repaired, move it away (mv " + path + " " + path + ".bad) and run apply again: " +
		"the host then starts from the newest committed generation and the mesh's recovery copy (see muster-apply(1), STATE)"
}

// loadState reads state.toml; a missing file is a host with no state.
func loadState(dir string, key stateKey) (*State, bool, error) {
	path := filepath.Join(dir, stateFile)
	data, err := tomlfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Version: stateVersion}, false, nil
	}
	if err != nil {
		return nil, false, tomlfile.In(path, err)
	}
	var s State
	if data, err = key.open(data); err != nil {
		return nil, false, fault.WithHint(fault.Refusedf("state file %s refused: %v", path, err), recoverHint(path))
	}
	err = tomlfile.Decode(data, &s)
	if err == nil && s.Version != stateVersion {
		err = fmt.Errorf("unknown version %d", s.Version)
	}
	if err != nil {
		return nil, false, fault.WithHint(fmt.Errorf("state file %s is corrupt: %v", path, err), recoverHint(path))
	}
	return &s, true, nil
}

func saveState(dir string, key stateKey, s *State) error {
	s.Version = stateVersion
	data, err := tomlfile.Encode("# muster host state: written by muster apply; see muster-apply(1)", s)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, stateFile), key.seal(data), 0o600)
}

// The ledger is a text file of one line per owned resource, read on every
// run: a tab-separated line parses many times faster than the same entry in
// TOML or JSON, and still reads and greps well.
//
//	# muster ledger 1: what this host owns; written by muster apply, see muster-apply(1)
//	file	/etc/motd	created	sha256:5e1a...
//	package	nginx	-	sha256:9c0d...
//
// The fields are the type, the path or name, "created" when muster created
// the resource (else "-"), and the digest of its last verified state (or
// "-"). A path or name holding a tab, a line break, a control character or
// a leading double quote is written as a Go-quoted string.
const ledgerHeader = "# muster ledger 1: what this host owns; written by muster apply, see muster-apply(1)"

// loadLedger reads the ledger file, and the ids of its entries in the
// file's order (by id, as saveLedger writes them: see ledger.InOrder); a
// missing file returns ok=false.
func loadLedger(dir string, key stateKey) (ledger.Ledger, []string, bool, error) {
	path := filepath.Join(dir, ledgerFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ledger.Ledger{}, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	if data, err = key.open(data); err != nil {
		return nil, nil, false, fault.WithHint(fault.Refusedf("ledger %s refused: %v", path, err), recoverHint(path))
	}
	// Not copied: the entries' strings point into the file's bytes,
	// which nothing writes again (10 MiB for a host of 100,000 files).
	l, ids, err := parseLedger(unsafe.String(unsafe.SliceData(data), len(data)))
	if err != nil {
		return nil, nil, false, fault.WithHint(fmt.Errorf("ledger %s is corrupt: %v", path, err), recoverHint(path))
	}
	return l, ids, true, nil
}

func parseLedger(text string) (ledger.Ledger, []string, error) {
	first, rest, _ := strings.Cut(text, "\n")
	if first != ledgerHeader {
		return nil, nil, errors.New("line 1: not a muster ledger of a version this muster knows")
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, nil, errors.New("the last line is cut short")
	}
	count := strings.Count(rest, "\n")
	l, ids := make(ledger.Ledger, count), make([]string, 0, count)
	sorted := true // so far, each id after the one before
	var f [4]string
	for n := 2; rest != ""; n++ {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		if k := strings.Count(line, "\t") + 1; k != 4 {
			return nil, nil, fmt.Errorf("line %d: %d fields, want 4", n, k)
		}
		f[0], line, _ = strings.Cut(line, "\t")
		f[1], line, _ = strings.Cut(line, "\t")
		f[2], f[3], _ = strings.Cut(line, "\t")
		e := ledger.Entry{Kind: resource.Kind(f[0])}
		where := f[1]
		if strings.HasPrefix(where, `"`) {
			var err error
			if where, err = strconv.Unquote(where); err != nil {
				return nil, nil, fmt.Errorf("line %d: bad quoted path or name", n)
			}
		}
		switch e.Kind {
		case resource.File, resource.Directory, resource.Symlink:
			e.Path = where
		case resource.Package, resource.Service, resource.User, resource.Group:
			e.Name = where
		default:
			return nil, nil, fmt.Errorf("line %d: unknown type %q", n, f[0])
		}
		switch f[2] {
		case "created":
			e.Created = true
		case "-":
		default:
			return nil, nil, fmt.Errorf("line %d: third field %q, want created or -", n, f[2])
		}
		if f[3] != "-" {
			if !strings.HasPrefix(f[3], "sha256:") {
				return nil, nil, fmt.Errorf("line %d: digest %q", n, f[3])
			}
			e.Digest = f[3]
		}
		if where == "" {
			return nil, nil, fmt.Errorf("line %d: no path or name", n)
		}
		e.ID = e.Spec().ID()
		// saveLedger lists the entries by id: while they come in that
		// order, one after the one before cannot be listed twice, and
		// needs no lookup to say so.
		if sorted = sorted && (len(ids) == 0 || e.ID > ids[len(ids)-1]); !sorted {
			if _, dup := l[e.ID]; dup {
				return nil, nil, fmt.Errorf("line %d: %s listed twice", n, e.ID)
			}
		}
		l[e.ID] = e
		ids = append(ids, e.ID)
	}
	return l, ids, nil
}

func saveLedger(dir string, key stateKey, l ledger.Ledger) error {
	return atomicfile.WriteFile(filepath.Join(dir, ledgerFile), key.seal(formatLedger(l)), 0o600)
}

// formatLedger is the ledger file's text for l, the entries by id.
func formatLedger(l ledger.Ledger) []byte {
	var b bytes.Buffer
	b.WriteString(ledgerHeader + "\n")
	for _, e := range l.Entries() {
		where := e.Path
		if !e.Kind.HasPath() {
			where = e.Name
		}
		if needsQuote(where) {
			where = strconv.Quote(where)
		}
		created, digest := "-", "-"
		if e.Created {
			created = "created"
		}
		if e.Digest != "" {
			digest = e.Digest
		}
		b.WriteString(string(e.Kind) + "\t" + where + "\t" + created + "\t" + digest + "\n")
	}
	return b.Bytes()
}

func needsQuote(s string) bool {
	if strings.HasPrefix(s, `"`) || !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// sameLedger reports whether two ledgers hold the same entries.
func sameLedger(a, b ledger.Ledger) bool {
	if len(a) != len(b) {
		return false
	}
	for id, e := range a {
		if f, ok := b[id]; !ok || f != e {
			return false
		}
	}
	return true
}

// Outbox: reports waiting to be written to the spool. The file name is the
// object name with "/" replaced by "%" (object names never hold "%").
func outboxPut(dir, name string, data []byte) error {
	od := filepath.Join(dir, outboxDir)
	if err := os.MkdirAll(od, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(od, strings.ReplaceAll(name, "/", "%")), data, 0o600)
}

type outboxItem struct {
	name, file string
}

func outboxList(dir string) ([]outboxItem, error) {
	ents, err := os.ReadDir(filepath.Join(dir, outboxDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []outboxItem
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name()) || e.IsDir() {
			continue
		}
		out = append(out, outboxItem{name: strings.ReplaceAll(e.Name(), "%", "/"), file: filepath.Join(dir, outboxDir, e.Name())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// stagingNote is the staging file of one run (see stagingFile).
type stagingNote struct {
	dir  string
	here bool // found at the start of the run, or written by it
}

func (n *stagingNote) path() string { return filepath.Join(n.dir, stagingFile) }

// found reports whether the last run left the note: it was killed.
func (n *stagingNote) found() bool {
	_, err := os.Lstat(n.path())
	n.here = err == nil
	return n.here
}

// write makes the note durable before the run's first temp file.
func (n *stagingNote) write() error {
	if n.here {
		return nil // still there from the killed run
	}
	if err := atomicfile.WriteFile(n.path(), nil, 0o600); err != nil {
		return fmt.Errorf("note in %s that temp files are being staged: %w", n.dir, err)
	}
	n.here = true
	return nil
}

// clear removes the note once the run's temp files are all gone.
func (n *stagingNote) clear() {
	if n.here {
		os.Remove(n.path())
		n.here = false
	}
}

// removeStaleTemps removes the temp files of atomic writes that a killed
// run left in the state directory and the outbox.
func removeStaleTemps(dir string) {
	for _, d := range []string{dir, filepath.Join(dir, outboxDir)} {
		names, _ := atomicfile.Temps(d)
		for _, n := range names {
			os.Remove(filepath.Join(d, n))
		}
	}
}

// lock takes the apply lock: one apply at a time per state directory.
type lock struct{ f *os.File }

func takeLock(dir string) (*lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			p := strings.TrimSpace(string(pid))
			if _, perr := strconv.Atoi(p); perr != nil {
				p = "unknown"
			}
			return nil, fault.Temporaryf("another apply is running (pid %s)", p)
		}
		return nil, err
	}
	// Overwrite, then cut: a reader never sees an empty file while we
	// hold the lock.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	f.WriteAt(pid, 0)
	f.Truncate(int64(len(pid)))
	return &lock{f: f}, nil
}

func (l *lock) release() {
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// flushOutbox sends waiting reports, oldest first, and returns the names of
// those sent. A report the spool already holds with the same bytes counts
// as sent (Put is a no-op then).
func flushOutbox(ctx context.Context, sp spool.Spool, state string) ([]string, error) {
	items, err := outboxList(state)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	var sent []string
	for _, it := range items {
		data, err := os.ReadFile(it.file)
		if err != nil {
			return sent, err
		}
		if err := putReport(ctx, sp, it.name, data); err != nil {
			return sent, err
		}
		if err := os.Remove(it.file); err != nil {
			return sent, err
		}
		sent = append(sent, it.name)
	}
	return sent, nil
}
