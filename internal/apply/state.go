package apply

import (
	"bytes"
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

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/ledger"
)

// State is what a host remembers between applies, in state.toml. It is
// written atomically; a file that exists but cannot be read fails closed:
// resetting it to generation 0 would reopen rollback.
type State struct {
	Version int `toml:"version"`
	// Generation is the newest generation this host applied (whatever
	// the outcome): a bundle older than this is a rollback.
	Generation uint64    `toml:"generation"`
	Run        string    `toml:"run"`
	AppliedAt  time.Time `toml:"applied_at"`
	// FailedVersions are muster versions whose self-check failed here;
	// they are not retried until a newer one is declared.
	FailedVersions []string `toml:"failed_versions,omitempty"`
}

const (
	stateFile  = "state.toml"
	ledgerFile = "ledger.toml"
	outboxDir  = "outbox"
	lockFile   = "apply.lock"
)

const stateVersion = 1

type ledgerDoc struct {
	Version int            `toml:"version"`
	Entry   []ledger.Entry `toml:"entry"`
}

// recoverHint is the documented way out of a corrupt state file.
func recoverHint(path string) string {
	return "if the file cannot be repaired, move it away (mv " + path + " " + path + ".bad) and run apply again: " +
		"the host then starts from the newest committed generation and the mesh's recovery copy (see muster-apply(1), STATE)"
}

// loadState reads state.toml; a missing file is a host with no state.
func loadState(dir string) (*State, bool, error) {
	path := filepath.Join(dir, stateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Version: stateVersion}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var s State
	md, err := toml.Decode(string(data), &s)
	if err == nil && len(md.Undecoded()) > 0 {
		err = fmt.Errorf("unknown key %q", md.Undecoded()[0].String())
	}
	if err == nil && s.Version != stateVersion {
		err = fmt.Errorf("unknown version %d", s.Version)
	}
	if err != nil {
		return nil, false, fault.WithHint(fmt.Errorf("state file %s is corrupt: %v", path, err), recoverHint(path))
	}
	return &s, true, nil
}

func saveState(dir string, s *State) error {
	s.Version = stateVersion
	var buf bytes.Buffer
	buf.WriteString("# muster host state: written by muster apply; see muster-apply(1)\n")
	if err := toml.NewEncoder(&buf).Encode(s); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, stateFile), buf.Bytes(), 0o600)
}

// loadLedger reads ledger.toml; a missing file returns ok=false.
func loadLedger(dir string) (ledger.Ledger, bool, error) {
	path := filepath.Join(dir, ledgerFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ledger.Ledger{}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var d ledgerDoc
	md, err := toml.Decode(string(data), &d)
	if err == nil && len(md.Undecoded()) > 0 {
		err = fmt.Errorf("unknown key %q", md.Undecoded()[0].String())
	}
	if err != nil {
		return nil, false, fault.WithHint(fmt.Errorf("ledger %s is corrupt: %v", path, err), recoverHint(path))
	}
	return ledger.FromEntries(d.Entry), true, nil
}

func saveLedger(dir string, l ledger.Ledger) error {
	var buf bytes.Buffer
	buf.WriteString("# what this host owns: written by muster apply; see muster-apply(1)\n")
	if err := toml.NewEncoder(&buf).Encode(ledgerDoc{Version: 1, Entry: l.Entries()}); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ledgerFile), buf.Bytes(), 0o600)
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
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &lock{f: f}, nil
}

func (l *lock) release() {
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
