package apply_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/outcome"
)

// smallDisk mounts a small tmpfs at a new directory and returns it; it is
// unmounted when the test ends, however it ends. It holds few files, so
// that filling it (fill) is quick and exact: a full filesystem is one where
// no file can be created.
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem for the state directory needs root")
	}
	dir := filepath.Join(t.TempDir(), "state-disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=128m,nr_inodes=200,mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fill creates files in dir until no more can be created (ENOSPC), and
// returns the function that removes them.
func fill(t *testing.T, dir string) func() {
	t.Helper()
	var made []string
	for i := 0; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf("filler-%d", i))
		f, err := os.Create(p)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		f.Close()
		made = append(made, p)
	}
	return func() {
		for _, p := range made {
			os.Remove(p)
		}
	}
}

// The story: the state directory's disk is full when apply has changed
// things. The report cannot go into the outbox; it goes straight to the
// spool. When the spool cannot take it either, apply says what it changed
// and fails for now (status 4), and the next run reports those changes,
// so the mesh hears of them late rather than never.
func TestReportNotLostWhenStateDiskIsFull(t *testing.T) {
	disk := smallDisk(t)
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(motd("one"))
	f.mustApply(h)

	// Move the host's state onto the small disk.
	if out, err := exec.Command("cp", "-a", h.state+"/.", disk).CombinedOutput(); err != nil {
		t.Fatalf("copy the state: %v: %s", err, out)
	}
	cfg, err := host.LoadConfig(h.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.State = disk
	if err := host.WriteConfig(h.config, cfg); err != nil {
		t.Fatal(err)
	}
	h.state = disk
	// The disk fills up once the run has changed motd and read it back
	// (its staging note is gone again; the clock is read for the
	// report's end time), as when what a run installs fills the disk.
	var room func()
	fillAfter := func(want string) func(*apply.Options) {
		return func(o *apply.Options) {
			o.Now = func() time.Time {
				b, _ := os.ReadFile(filepath.Join(h.root, "etc/motd"))
				_, err := os.Lstat(filepath.Join(disk, "staging"))
				if room == nil && string(b) == want && errors.Is(err, os.ErrNotExist) {
					room = fill(t, disk)
				}
				return time.Now()
			}
		}
	}

	// The outbox cannot be written: the report goes to the spool
	// directly, and its changed line is in it.
	f.declare(motd("two"))
	res, err := f.apply(h, fillAfter("two\n"))
	if res == nil || !res.Sent || fault.ClassOf(err) != fault.Temporary || !strings.Contains(err.Error(), "state could not be kept") {
		t.Fatalf("apply on a full state disk: %+v, %v; want the report sent directly, and a temporary failure for the state", res, err)
	}
	reps := f.reports(h)
	if l := lineOf(t, reps[len(reps)-1], "file:/etc/motd"); l.Status != outcome.Changed {
		t.Errorf("the report sent directly says %s for motd", l.Status)
	}
	room()
	room = nil
	f.mustApply(h)

	// Neither the outbox nor the spool: the run changed motd, says so,
	// and is a temporary failure.
	f.declare(motd("three"))
	sp := &outage{Spool: f.m.Spool, reportsDown: true}
	sent := len(f.reports(h))
	res, err = f.apply(h, func(o *apply.Options) { o.Spool = sp }, fillAfter("three\n"))
	if fault.ClassOf(err) != fault.Temporary || !strings.Contains(err.Error(), "outbox") || !strings.Contains(err.Error(), "nor sent") {
		t.Fatalf("apply with no outbox and no spool: %v (class %v), want a temporary failure naming both", err, fault.ClassOf(err))
	}
	if res == nil || res.Report == nil || lineOf(t, res.Report, "file:/etc/motd").Status != outcome.Changed {
		t.Fatalf("the result does not carry the changed line for the command to print: %+v", res)
	}
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "three\n" {
		t.Fatalf("motd %q", got)
	}
	if n := len(f.reports(h)); n != sent {
		t.Fatalf("%d reports reached the spool while it was down", n-sent)
	}

	// Room again, and the spool back: the next run reports the change
	// the lost report held.
	room()
	res = f.mustApply(h)
	l := lineOf(t, res.Report, "file:/etc/motd")
	if l.Status != outcome.Changed || !strings.Contains(l.Detail, "since this host last reported") {
		t.Errorf("the next run says %s %q for motd, want the lost change reported", l.Status, l.Detail)
	}
	if res = f.mustApply(h); res.Changed != 0 {
		t.Errorf("the run after says %d changed", res.Changed)
	}
}
