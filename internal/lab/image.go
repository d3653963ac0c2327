package lab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// imagePackages are installed besides the essential packages and apt:
// systemd to boot, dbus for the system bus muster and systemctl talk to.
var imagePackages = []string{"systemd", "systemd-sysv", "dbus"}

// imageRecipe is the version of how the image is made; change it when the
// build below changes, so cached images of the old recipe are not used.
const imageRecipe = "muster-lab image 1"

// DefaultCache is where images are kept between runs, outside any
// checkout; MUSTER_LAB_CACHE overrides it.
const DefaultCache = "/var/cache/muster-lab"

// Image returns the root directory of the hosts' image, building it with
// mmdebstrap from this machine's apt sources the first time. It is cached
// under the cache directory, keyed by a digest of its package list, its
// suite, its sources and the recipe; a build that did not finish is never
// used. Concurrent callers wait for one build.
func Image(ctx context.Context, logf func(string, ...any)) (string, error) {
	cache := os.Getenv("MUSTER_LAB_CACHE")
	if cache == "" {
		cache = DefaultCache
	}
	suite, err := codename()
	if err != nil {
		return "", err
	}
	sources := aptSources()
	if len(sources) == 0 {
		return "", errors.New("no apt sources on this machine (/etc/apt/sources.list, /etc/apt/sources.list.d) to build the lab image from")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", imageRecipe, suite, strings.Join(imagePackages, ","))
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n%s\n", src, b)
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	dir := filepath.Join(cache, key)
	root := filepath.Join(dir, "root")
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err == nil {
		return root, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(done); err == nil {
		return root, nil // built while we waited
	}
	tmp := root + ".building"
	for _, d := range []string{root, tmp} {
		if err := removeTree(d); err != nil {
			return "", err
		}
	}
	args := []string{"--variant=apt", "--mode=root", "--format=directory",
		"--include=" + strings.Join(imagePackages, ","),
		// The hosts are told apart by what the lab writes: no name or
		// identity comes with the image.
		"--customize-hook=rm -f \"$1/etc/hostname\"; : > \"$1/etc/machine-id\"",
		suite, tmp}
	args = append(args, sources...)
	start := time.Now()
	logf("lab: building the host image %s with mmdebstrap (once; cached in %s)", key, cache)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	// mmdebstrap cleans up its mounts when told to stop with SIGTERM.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("mmdebstrap: %w", err)
	}
	stopped := make(chan struct{})
	unwatch := AtSignal(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-stopped:
		case <-time.After(time.Minute):
		}
		removeTree(tmp)
	})
	err = cmd.Wait()
	close(stopped)
	unwatch()
	if err != nil {
		removeTree(tmp)
		return "", fmt.Errorf("mmdebstrap %s: %v\n%s", strings.Join(args, " "), err, tail(out.Bytes(), 30))
	}
	if err := os.Rename(tmp, root); err != nil {
		return "", err
	}
	if err := os.WriteFile(done, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", err
	}
	logf("lab: image built in %s", time.Since(start).Round(time.Second))
	return root, nil
}

// codename is this machine's Debian release name, which the image is
// built from.
func codename() (string, error) {
	f, err := os.Open("/etc/os-release")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VERSION_CODENAME="); ok && v != "" {
			return strings.Trim(v, `"`), nil
		}
	}
	return "", errors.New("/etc/os-release names no VERSION_CODENAME to build the lab image from")
}

// aptSources are this machine's apt source files, which mmdebstrap takes
// as its mirrors.
func aptSources() []string {
	var out []string
	if fi, err := os.Stat("/etc/apt/sources.list"); err == nil && fi.Size() > 0 {
		out = append(out, "/etc/apt/sources.list")
	}
	for _, pat := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join("/etc/apt/sources.list.d", pat))
		out = append(out, m...)
	}
	return out
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
