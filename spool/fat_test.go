package spool_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/muster-tool/muster/spool"
	"github.com/muster-tool/muster/spool/spooltest"
)

// Spools travel on USB sticks formatted FAT32 or exFAT. Where the kernel
// has no driver for them they are mounted through FUSE, which offers
// neither hard links nor rename without replacing, so Put takes its last
// fallback there. These tests mount real FAT32 and exFAT images with the
// FUSE drivers scripts/test-deps.sh installs (fusefat, exfat-fuse) and run
// the spool on them.

// fatFS is a FUSE driver for one filesystem and how to mount an image
// with it.
type fatFS struct {
	name  string
	need  []string // commands: the driver, mkfs, fsck
	mkfs  []string // makes the filesystem on the image path appended
	fsck  []string // checks the filesystem on the image path appended, changing nothing
	mount func(t *testing.T, img *os.File, mnt string) *exec.Cmd
}

var fatFilesystems = []fatFS{
	{
		name: "fat32",
		need: []string{"fusefat", "mkfs.vfat", "fsck.vfat"},
		mkfs: []string{"mkfs.vfat", "-F", "32", "-s", "1"},
		fsck: []string{"fsck.vfat", "-n"},
		mount: func(t *testing.T, img *os.File, mnt string) *exec.Cmd {
			// rw+: fusefat mounts read-only unless told; auto_unmount:
			// the mount goes when the driver does, however it ends.
			cmd := exec.Command("fusefat", "-f", "-o", "rw+,auto_unmount", "/dev/fd/3", mnt)
			cmd.ExtraFiles = []*os.File{img}
			return cmd
		},
	},
	{
		name: "exfat",
		need: []string{"mount.exfat-fuse", "mkfs.exfat", "fsck.exfat"},
		mkfs: []string{"mkfs.exfat"},
		fsck: []string{"fsck.exfat", "-n"},
		mount: func(t *testing.T, img *os.File, mnt string) *exec.Cmd {
			// Run as root, exfat-fuse mounts only a block device.
			loop := loopDevice(t, img)
			// -d keeps it in the foreground (and logs each request).
			return exec.Command("mount.exfat-fuse", "-d", loop, mnt)
		},
	},
}

// TestFAT runs the spool on FAT32 and exFAT through FUSE: the conformance
// suite (create-if-absent, whole objects only, racing writers), a sync onto
// the stick and back, PutMany and temp files. The filesystem must be
// consistent afterwards (fsck).
func TestFAT(t *testing.T) {
	for _, fsys := range fatFilesystems {
		t.Run(fsys.name, func(t *testing.T) {
			mnt := mountFAT(t, fsys)
			t.Run("Conformance", func(t *testing.T) {
				spooltest.Run(t, func(t *testing.T) spool.Spool { return dirOn(t, mnt) })
			})
			t.Run("Sync", func(t *testing.T) { testFATSync(t, dirOn(t, mnt)) })
			t.Run("PutMany", func(t *testing.T) { testFATPutMany(t, dirOn(t, mnt)) })
			t.Run("Temps", func(t *testing.T) { testFATTemps(t, dirOn(t, mnt)) })
			t.Run("Stamps", func(t *testing.T) { testFATStamps(t, dirOn(t, mnt)) })
		})
	}
}

// testFATSync is the sneakernet trip: sync a spool onto the stick, sync
// again (nothing to do), let the site add reports and an object the mesh
// also has with other bytes, and merge both ways. Nothing is replaced on
// either side.
func testFATSync(t *testing.T, stick *spool.Dir) {
	ctx := t.Context()
	s := newSigner(t)
	mesh := newDir(t)
	fromMesh := s.fill(t, mesh, "mesh/keys", spool.CommitName(1), spool.DeclName(1, "r1", "n1"),
		spool.DeclName(1, "r1", "n2"), spool.BriefName("n1", 1), spool.AdmitName("tok1"))
	res, err := spool.Sync(ctx, mesh, stick, checked)
	if err != nil || res.Copied != len(fromMesh) {
		t.Fatalf("sync onto the stick = %+v, %v; want %d copied", res, err, len(fromMesh))
	}
	sameContents(t, "stick", contents(t, stick), fromMesh)
	if res, err := spool.Sync(ctx, mesh, stick, checked); err != nil || res.Copied != 0 || res.Skipped != len(fromMesh) {
		t.Errorf("second sync = %+v, %v; want nothing copied", res, err)
	}

	fromSite := s.fill(t, stick, spool.ReportName("n1", 1, 1), spool.ReportName("n2", 1, 1))
	theirs := s.bundle(t, spool.AdmitName("tok2"), 300)
	if err := stick.Put(ctx, spool.AdmitName("tok2"), theirs); err != nil {
		t.Fatal(err)
	}
	ours := s.fill(t, mesh, spool.AdmitName("tok2"))
	res, err = spool.Sync(ctx, mesh, stick, checked)
	if !errors.Is(err, spool.ErrConflict) || len(res.Conflicts) != 1 || res.Conflicts[0].Name != spool.AdmitName("tok2") {
		t.Errorf("sync with a conflict = %+v, %v; want the conflict on %s", res, err, spool.AdmitName("tok2"))
	}
	if _, err := spool.Sync(ctx, stick, mesh, checked); !errors.Is(err, spool.ErrConflict) {
		t.Errorf("sync back: %v, want the conflict", err)
	}
	sameContents(t, "stick", contents(t, stick), merged(fromMesh, fromSite, map[string][]byte{spool.AdmitName("tok2"): theirs}))
	sameContents(t, "mesh", contents(t, mesh), merged(fromMesh, fromSite, ours))
	if left := temps(t, stick); len(left) != 0 {
		t.Errorf("temp files left on the stick: %v", left)
	}
}

// testFATPutMany: a batch is written whole and never replaces an object.
// syncfs(2) does not reach a FUSE driver, so the batch must not rely on it.
func testFATPutMany(t *testing.T, d *spool.Dir) {
	ctx := t.Context()
	if spool.SyncfsTrusted(d) {
		t.Error("PutMany trusts syncfs on FUSE, where it never reaches the driver")
	}
	batch := []spool.Object{
		{Name: spool.DeclName(3, "r3", "n1"), Data: []byte("decl n1")},
		{Name: spool.DeclName(3, "r3", "n2"), Data: []byte("decl n2")},
		{Name: spool.CommitName(3), Data: []byte("commit 3")},
	}
	if err := spool.PutMany(ctx, d, batch); err != nil {
		t.Fatal(err)
	}
	again := slices.Clone(batch)
	again[2].Data = []byte("another commit 3")
	if err := spool.PutMany(ctx, d, again); !errors.Is(err, spool.ErrConflict) {
		t.Errorf("PutMany over an object with other bytes: %v, want ErrConflict", err)
	}
	for _, o := range batch {
		if got, err := d.Get(ctx, o.Name, 0); err != nil || !bytes.Equal(got, o.Data) {
			t.Errorf("Get(%s) = %q, %v; want %q", o.Name, got, err, o.Data)
		}
	}
}

// testFATTemps: what a crashed Put leaves on the stick is found by Temps
// with a sane age and removed by RemoveTemp; neither it nor what Windows
// leaves on a stick is listed as an object.
func testFATTemps(t *testing.T, d *spool.Dir) {
	if err := d.Put(t.Context(), "mesh/keys", []byte("keys")); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(d.Path(), ".muster-tmp-0123456789abcdef")
	if err := os.WriteFile(left, []byte("half a"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d.Path(), "System Volume Information"), 0o777); err != nil {
		t.Fatal(err)
	}
	found := temps(t, d)
	if age, ok := found[left]; len(found) != 1 || !ok || age > time.Minute {
		t.Errorf("Temps = %v, want only %s, just written", found, left)
	}
	if got := listNames(t, d, ""); !slices.Equal(got, []string{"mesh/keys"}) {
		t.Errorf("List = %q, want only mesh/keys", got)
	}
	if err := d.RemoveTemp(left); err != nil {
		t.Fatal(err)
	}
	if found := temps(t, d); len(found) != 0 {
		t.Errorf("Temps after RemoveTemp = %v", found)
	}
}

// dirOn opens a new, empty spool in a directory of its own below mnt.
func dirOn(t *testing.T, mnt string) *spool.Dir {
	t.Helper()
	dir, err := os.MkdirTemp(mnt, "spool-")
	if err != nil {
		t.Fatal(err)
	}
	d, err := spool.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mountFAT makes a filesystem on a new image and mounts it with its FUSE
// driver, returning the mount point. The image is a memfd, so it goes
// with the last process holding it, however the test ends. The driver is
// told to stop when the test process dies (an interrupt, a timeout): it
// then unmounts. Otherwise cleanup unmounts, waits for the driver and
// checks the filesystem with fsck.
func mountFAT(t *testing.T, fsys fatFS) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a filesystem image through FUSE needs root")
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		t.Skipf("no FUSE here: %v", err)
	} else {
		f.Close()
	}
	for _, c := range fsys.need {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed (scripts/test-deps.sh installs it)", c)
		}
	}
	fd, err := unix.MemfdCreate("muster-"+fsys.name, unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	img := os.NewFile(uintptr(fd), fsys.name+" image")
	t.Cleanup(func() { img.Close() })
	if err := img.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	runOnImage(t, img, fsys.mkfs...)

	mnt := t.TempDir()
	cmd := fsys.mount(t, img, mnt)
	out := &tail{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Registered after t.TempDir, so it runs before the mount point is
	// removed.
	t.Cleanup(func() {
		unmount(t, mnt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			// fusefat writes the image back when unmounted, which
			// took over 10 s once on a loaded machine.
			t.Errorf("%s did not exit after the unmount; killing it", cmd.Path)
			cmd.Process.Kill()
			<-exited
		}
		if !t.Failed() {
			runOnImage(t, img, fsys.fsck...)
		}
	})
	for start := time.Now(); ; {
		var st unix.Statfs_t
		if err := unix.Statfs(mnt, &st); err == nil && st.Type == unix.FUSE_SUPER_MAGIC {
			return mnt
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s exited before mounting %s: %v\n%s", cmd.Path, fsys.name, err, out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s has not mounted %s after 10s\n%s", cmd.Path, fsys.name, out)
		}
	}
}

// unmount unmounts mnt, waiting while it is busy, and detaches it (a lazy
// unmount) if it stays busy.
func unmount(t *testing.T, mnt string) {
	err := unix.Unmount(mnt, 0)
	for i := 0; errors.Is(err, unix.EBUSY) && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		err = unix.Unmount(mnt, 0)
	}
	switch {
	case err == nil, errors.Is(err, unix.EINVAL): // EINVAL: no longer mounted
	default:
		t.Errorf("unmount %s: %v; detaching it", mnt, err)
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("detach %s: %v", mnt, err)
		}
	}
}

// runOnImage runs a command on the image, which it sees as /dev/fd/3.
func runOnImage(t *testing.T, img *os.File, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], append(argv[1:], "/dev/fd/3")...)
	cmd.ExtraFiles = []*os.File{img}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%q: %v\n%s", argv, err, out)
	}
}

// loopDevice attaches img to a free loop device, which detaches itself
// once the last process holding it closes it, and returns its path.
func loopDevice(t *testing.T, img *os.File) string {
	t.Helper()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no loop devices here, which exfat-fuse needs: %v", err)
	}
	defer ctl.Close()
	for range 10 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Fatalf("find a free loop device: %v", err)
		}
		path := fmt.Sprintf("/dev/loop%d", n)
		dev, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Skipf("no loop devices here, which exfat-fuse needs: %v", err)
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &unix.LoopConfig{
			Fd:   uint32(img.Fd()),
			Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR},
		})
		if errors.Is(err, unix.EBUSY) {
			dev.Close() // taken since we asked
			continue
		}
		if err != nil {
			dev.Close()
			t.Fatalf("attach the image to %s: %v", path, err)
		}
		// Held open until the driver has opened it too: closing the
		// last holder detaches it.
		t.Cleanup(func() { dev.Close() })
		return path
	}
	t.Fatal("no free loop device after 10 tries")
	return ""
}

// tail keeps the last max bytes written to it: a driver's last words.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = w.buf[len(w.buf)-w.max:]
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
