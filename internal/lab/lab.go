// Package lab boots a fleet of real Debian hosts for the tests: each one a
// minimal bookworm root, built once by mmdebstrap and cached outside the
// checkout, booted by systemd-nspawn with systemd as PID 1 from its own
// overlay (so hosts never share state and survive a reboot), sharing the
// network of the machine it runs on. Commands run inside a host with
// nsenter on the host's init. TestLab drives muster's whole story on such
// a fleet; `make lab` runs it and prints each check.
//
// A lab cleans up what it made, whatever ends it: when the test ends or
// fails, Close stops the hosts (killing those that do not stop), removes
// their cgroups, unmounts every mount below the lab's scratch directory
// and removes it; a SIGINT or SIGTERM cancels the lab test's context, so
// that it fails and ends as above, and a second one closes every open
// lab at once before the process exits; what a lab killed outright
// (SIGKILL) left behind is found by the next lab made in the same place
// and removed then.
package lab

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Lab is a set of hosts booted from one image, with the scratch directory
// that holds their overlays.
type Lab struct {
	Image string // the cached root every host boots from
	Dir   string // scratch: one directory per host
	Logf  func(format string, args ...any)

	mu       sync.Mutex
	machines []*Machine
	closing  bool
	once     sync.Once
	closeErr error
	unwatch  func()
}

// CanBoot says why containers cannot boot here, or "" when they can.
func CanBoot() string {
	if os.Geteuid() != 0 {
		return "booting containers needs root"
	}
	for _, tool := range []string{"systemd-nspawn", "mmdebstrap", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (scripts/test-deps.sh installs it)"
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		return "no cgroup file system at /sys/fs/cgroup"
	}
	return ""
}

// scratchPrefix starts the name of every lab's scratch directory; its
// owner file names the process that made it.
const (
	scratchPrefix = "muster-lab-"
	ownerFile     = "owner"
)

// New makes a lab booting hosts from image, its scratch directory under
// dir. The leftovers of labs in dir whose process is gone are removed
// first. Until Close, a second SIGINT or SIGTERM closes the lab before
// the process exits (see Interruptible for the first).
func New(image, dir string, logf func(string, ...any)) (*Lab, error) {
	reapStale(dir, logf)
	scratch, err := os.MkdirTemp(dir, scratchPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(scratch, ownerFile), []byte(processID(os.Getpid())+"\n"), 0o644); err != nil {
		os.Remove(scratch)
		return nil, err
	}
	l := &Lab{Image: image, Dir: scratch, Logf: logf}
	l.unwatch = AtSignal(func() {
		l.Logf("lab: stopping the hosts and removing %s", l.Dir)
		if err := l.Close(); err != nil {
			l.Logf("lab: %v", err)
		}
	})
	return l, nil
}

// The signal handler of the process, one for every lab and build. The
// first SIGINT or SIGTERM cancels every context made by Interruptible: a
// lab test then fails where it is, and ends through its own clean-ups
// (Close, its temporary directories, its servers) as it does at any other
// end. A second signal is for a test that does not end: it runs every
// function given to AtSignal, all at once, and exits once all returned.
var signals struct {
	sync.Mutex
	ch      chan os.Signal
	next    int
	cancels map[int]func()
	closers map[int]func()
}

// Interruptible returns a context that the first SIGINT or SIGTERM of
// the process cancels.
func Interruptible(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	remove := register(&signals.cancels, cancel)
	return ctx, func() { remove(); cancel() }
}

// AtSignal runs f when the process gets a second SIGINT or SIGTERM,
// together with every other function so registered, and exits with
// status 130 once all have returned; further signals meanwhile are
// ignored. The returned function removes f.
func AtSignal(f func()) (remove func()) {
	return register(&signals.closers, f)
}

func register(set *map[int]func(), f func()) (remove func()) {
	signals.Lock()
	defer signals.Unlock()
	if signals.ch == nil {
		signals.ch = make(chan os.Signal, 2)
		signals.cancels, signals.closers = map[int]func(){}, map[int]func(){}
		signal.Notify(signals.ch, os.Interrupt, syscall.SIGTERM)
		go handleSignals()
	}
	id := signals.next
	signals.next++
	(*set)[id] = f
	return func() {
		signals.Lock()
		defer signals.Unlock()
		delete(*set, id)
	}
}

func handleSignals() {
	s := <-signals.ch
	fmt.Fprintf(os.Stderr, "lab: %s: ending the lab and cleaning up (again to clean up and exit at once)\n", s)
	signals.Lock()
	for _, f := range signals.cancels {
		f()
	}
	signals.Unlock()
	s = <-signals.ch
	fmt.Fprintf(os.Stderr, "lab: %s: cleaning up and exiting\n", s)
	signals.Lock()
	var wg sync.WaitGroup
	for _, f := range signals.closers {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	signals.Unlock()
	wg.Wait()
	os.Exit(130)
}

// Close stops every host, unmounts every mount below the scratch
// directory and removes it. Calls after the first wait for it and return
// its error.
func (l *Lab) Close() error {
	l.once.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Lab) close() error {
	l.mu.Lock()
	l.closing = true
	machines := l.machines
	l.mu.Unlock()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, m := range machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.stop(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := removeScratch(l.Dir); err != nil {
		errs = append(errs, err)
	}
	if l.unwatch != nil {
		l.unwatch()
	}
	return errors.Join(errs...)
}

// removeScratch kills what still runs from dir (a container whose
// systemd-nspawn is gone), removes the cgroups its hosts ran in, and
// removes it.
func removeScratch(dir string) error {
	killRoots(dir)
	removeCgroups(dir)
	return removeTree(dir)
}

// removeTree unmounts everything mounted at or below dir, deepest first,
// and removes it. It never removes a directory something is still
// mounted below: that could reach outside it (a bind mount of /dev left
// by a build that was killed).
func removeTree(dir string) error {
	for range 5 {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			break
		}
		for _, mp := range mounts {
			unix.Unmount(mp, unix.MNT_DETACH)
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("left %s in place: still mounted below it: %s", dir, strings.Join(left, ", "))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir in this process's
// mount namespace, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pidsFile, in a host's scratch directory, names its systemd-nspawn and
// its init while it runs.
const pidsFile = "pids"

// killRoots kills the hosts of the lab in dir that still run: their init
// (and so every process of its PID namespace) and their systemd-nspawn,
// as the pids files name them, and any systemd-nspawn booting a root
// below dir.
func killRoots(dir string) {
	for range 10 {
		var pids []int
		files, _ := filepath.Glob(filepath.Join(dir, "*", pidsFile))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, id := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				pid, _ := strconv.Atoi(strings.Fields(id + " 0")[0])
				if pid > 0 && processID(pid) == id {
					pids = append(pids, pid)
				}
			}
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Contains(string(cmdline), "--directory="+dir+"/") {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// processID names a process so that a later one given the same PID is
// not taken for it: its PID and the time it started.
func processID(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The fields after the command name, which is in parentheses and
	// may hold spaces; the start time is field 22.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return ""
	}
	return strconv.Itoa(pid) + " " + fields[19]
}

// reapStale removes the scratch directories in dir of labs whose process
// has gone without removing them (killed, or timed out).
func reapStale(dir string, logf func(string, ...any)) {
	matches, _ := filepath.Glob(filepath.Join(dir, scratchPrefix+"*"))
	for _, scratch := range matches {
		b, err := os.ReadFile(filepath.Join(scratch, ownerFile))
		owner := strings.TrimSpace(string(b))
		if err == nil && owner != "" {
			pid, _ := strconv.Atoi(strings.Fields(owner)[0])
			if pid > 0 && processID(pid) == owner {
				continue // its lab is still running
			}
		} else if fi, err := os.Stat(scratch); err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue // being made just now
		}
		if err := removeScratch(scratch); err != nil {
			logf("lab: the leftovers of an earlier lab: %v", err)
			continue
		}
		logf("lab: removed %s, left by an earlier lab that did not end", scratch)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
