// Package lab boots a fleet of real Debian hosts for the tests: each one a
// minimal bookworm root, built once by mmdebstrap and cached outside the
// checkout, booted by systemd-nspawn with systemd as PID 1 from its own
// overlay (so hosts never share state and survive a reboot), sharing the
// network of the machine it runs on. Commands run inside a host with
// nsenter on the host's init. TestLab drives muster's whole story on such
// a fleet; `make lab` runs it and prints each check.
//
// A Lab cleans up what it made: the containers are stopped (killed if they
// do not stop), the overlays and spool mounts unmounted and the scratch
// directory removed, when the test ends, fails, or is interrupted.
package lab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

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
	mounts   []string // mount points to unmount, in order, at Close
	closed   bool
	stopSig  func()
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

// New makes a lab booting hosts from image, its scratch directory under
// dir. Interrupting the process (SIGINT, SIGTERM) closes the lab before
// it exits.
func New(image, dir string, logf func(string, ...any)) (*Lab, error) {
	scratch, err := os.MkdirTemp(dir, "muster-lab-")
	if err != nil {
		return nil, err
	}
	l := &Lab{Image: image, Dir: scratch, Logf: logf}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			l.Logf("lab: %s: stopping the hosts and removing %s", s, l.Dir)
			l.Close()
			os.Exit(130)
		case <-done:
		}
	}()
	l.stopSig = func() { signal.Stop(sig); close(done) }
	return l, nil
}

// Close stops every host, unmounts what the lab mounted and removes its
// scratch directory. It is safe to call more than once.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	machines, mounts := l.machines, l.mounts
	l.mu.Unlock()
	if l.stopSig != nil {
		l.stopSig()
	}
	var errs []error
	var wg sync.WaitGroup
	for _, m := range machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.stop(); err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	for _, m := range machines {
		if err := unmountAll(m.root); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unmountAll(mounts[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(l.Dir); err != nil {
			errs = append(errs, err)
		}
	} else {
		errs = append(errs, fmt.Errorf("left %s in place", l.Dir))
	}
	return errors.Join(errs...)
}

// unmountAll unmounts path and everything mounted below it, until nothing
// is mounted there.
func unmountAll(path string) error {
	for range 20 {
		err := unix.Unmount(path, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not a mount point (any more)
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", path)
}

// Gate makes dir a mount point of its own with shared propagation, so
// that what is mounted on it later appears in every host it is bound into,
// and unmounting it takes it away from them again.
func (l *Lab) Gate(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dir, err)
	}
	l.track(dir)
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}

// Attach binds src onto the gate dir; Detach unmounts it again.
func (l *Lab) Attach(src, gate string) error {
	if err := unix.Mount(src, gate, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, gate, err)
	}
	l.track(gate)
	return nil
}

// Detach unmounts what Attach bound on gate.
func (l *Lab) Detach(gate string) error {
	if err := unix.Unmount(gate, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", gate, err)
	}
	return nil
}

func (l *Lab) track(mountPoint string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mounts = append(l.mounts, mountPoint)
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

var _ = filepath.Join
