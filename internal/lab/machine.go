package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Machine is one booted host.
type Machine struct {
	Name  string
	lab   *Lab
	dir   string   // its scratch directory: upper, work, root, log
	root  string   // the overlay: image below, the host's own changes above
	binds []string // systemd-nspawn --bind arguments
	cgs   []string // the cgroups it runs in (see cgroup.go)

	cmd    *exec.Cmd
	exited chan struct{}
	status int // the exit status of systemd-nspawn, once exited
	leader int // PID of the host's init, as this machine sees it
}

// Boot makes a host called name from the lab's image and boots it. binds
// are "SRC:DST" directories bound into it.
func (l *Lab) Boot(ctx context.Context, name string, binds ...string) (*Machine, error) {
	m := &Machine{Name: name, lab: l, dir: filepath.Join(l.Dir, name), binds: binds}
	m.root = filepath.Join(m.dir, "root")
	for _, d := range []string{"upper/etc", "work", "root"} {
		if err := os.MkdirAll(filepath.Join(m.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// Its own name and identity, kept across reboots in its overlay.
	if err := os.WriteFile(filepath.Join(m.dir, "upper/etc/hostname"), []byte(name+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(m.dir, "upper/etc/machine-id"), []byte(randomHex(16)+"\n"), 0o444); err != nil {
		return nil, err
	}
	cgs, err := makeCgroups(m.dir, filepath.Base(l.Dir)+"-"+name)
	if err != nil {
		return nil, err
	}
	m.cgs = cgs
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", l.Image, filepath.Join(m.dir, "upper"), filepath.Join(m.dir, "work"))
	if err := unix.Mount("overlay", m.root, "overlay", 0, opts); err != nil {
		return nil, fmt.Errorf("mount the overlay of %s: %w", name, err)
	}
	l.mu.Lock()
	closing := l.closing
	if !closing {
		l.machines = append(l.machines, m)
	}
	l.mu.Unlock()
	if closing {
		return nil, errors.New("the lab is closing")
	}
	return m, m.start(ctx)
}

// start boots the host and waits until systemd, as its PID 1, says the
// system is running.
func (m *Machine) start(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(m.dir, "nspawn.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// No machined on a machine without systemd: not registered, and in
	// the cgroups made for the host, which a shell puts itself in before
	// it becomes systemd-nspawn. The network is the machine's.
	args := []string{"-c", `for cg; do [ "$cg" = -- ] && break; echo $$ > "$cg/cgroup.procs" || exit 125; shift; done; shift; exec "$@"`, "lab"}
	args = append(append(args, m.cgs...), "--", "systemd-nspawn", "--quiet", "--boot", "--register=no", "--keep-unit", "--console=passive",
		"--machine="+m.Name, "--directory="+m.root)
	for _, b := range m.binds {
		args = append(args, "--bind="+b)
	}
	m.cmd = exec.Command("/bin/sh", args...)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	// Its own process group: a Ctrl-C in the terminal reaches the lab,
	// which stops the hosts in order, not systemd-nspawn directly. If
	// the lab's process dies, systemd-nspawn is told to shut its host
	// down.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start systemd-nspawn for %s: %w", m.Name, err)
	}
	m.exited = make(chan struct{})
	go func() {
		err := m.cmd.Wait()
		log.Close()
		m.status = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			m.status = ee.ExitCode()
		}
		close(m.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for m.leader = 0; m.leader == 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: systemd did not start within a minute:\n%s", m.Name, m.Log())
		}
		select {
		case <-m.exited:
			return fmt.Errorf("%s: systemd-nspawn exited with status %d:\n%s", m.Name, m.status, m.Log())
		case <-time.After(100 * time.Millisecond):
		}
		m.leader = initOf(m.cmd.Process.Pid)
	}
	// What to kill if this process dies before it stops the host (see
	// killRoots).
	pids := processID(m.cmd.Process.Pid) + "\n" + processID(m.leader) + "\n"
	if err := os.WriteFile(filepath.Join(m.dir, pidsFile), []byte(pids), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	// Until systemd listens on its socket, systemctl cannot ask it.
	var state string
	for {
		state, err = m.Run(ctx, "systemctl", "is-system-running", "--wait")
		state = strings.TrimSpace(state)
		if (state != "" && state != "offline") || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if state != "running" {
		failed, _ := m.Run(context.Background(), "systemctl", "--failed", "--no-legend")
		return fmt.Errorf("%s: systemctl is-system-running says %q (%v); failed units:\n%s", m.Name, state, err, failed)
	}
	if pid1, _ := m.Run(ctx, "cat", "/proc/1/comm"); strings.TrimSpace(pid1) != "systemd" {
		return fmt.Errorf("%s: PID 1 is %q, not systemd", m.Name, strings.TrimSpace(pid1))
	}
	return nil
}

// initOf is the child of systemd-nspawn that runs systemd, 0 until it
// does.
func initOf(nspawn int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", nspawn, nspawn))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "systemd" {
			return pid
		}
	}
	return 0
}

// Log is the end of what systemd-nspawn printed.
func (m *Machine) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "nspawn.log"))
	return tail(b, 40)
}

// Run runs a command inside the host, in all its namespaces, with a
// clean environment, and returns its standard output. A failure carries
// the exit status and what the command printed.
func (m *Machine) Run(ctx context.Context, args ...string) (string, error) {
	return m.RunInput(ctx, nil, args...)
}

// RunInput is Run with stdin.
func (m *Machine) RunInput(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	full := append([]string{"-t", strconv.Itoa(m.leader), "-a", "--",
		"/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C"}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		err = &RunError{Host: m.Name, Args: args, Err: err, Stdout: stdout.String(), Stderr: stderr.String()}
	}
	return stdout.String(), err
}

// RunError is a command inside a host that failed.
type RunError struct {
	Host           string
	Args           []string
	Err            error
	Stdout, Stderr string
}

func (e *RunError) Error() string {
	return fmt.Sprintf("%s: %s: %v\n%s%s", e.Host, strings.Join(e.Args, " "), e.Err, e.Stdout, e.Stderr)
}

// ExitCode is the command's exit status, -1 when it did not exit.
func (e *RunError) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.Err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Shell runs a shell command line inside the host.
func (m *Machine) Shell(ctx context.Context, script string) (string, error) {
	return m.Run(ctx, "/bin/sh", "-c", script)
}

// Path is where a path inside the host is, seen from the machine.
func (m *Machine) Path(p string) string { return filepath.Join(m.root, p) }

// Reboot reboots the host from inside (systemctl reboot) and waits until
// it has shut down; Up boots it again.
func (m *Machine) Reboot(ctx context.Context) error {
	m.Run(ctx, "systemctl", "reboot") // the connection may go with it
	select {
	case <-m.exited:
	case <-time.After(90 * time.Second):
		return fmt.Errorf("%s: did not shut down within 90s of systemctl reboot", m.Name)
	}
	// systemd-nspawn exits 133 when the container asks for a reboot;
	// here the lab, not a service manager, boots it again.
	if m.status != 133 {
		return fmt.Errorf("%s: systemd-nspawn exited %d on reboot, want 133:\n%s", m.Name, m.status, m.Log())
	}
	return nil
}

// Up boots a host that Reboot shut down.
func (m *Machine) Up(ctx context.Context) error { return m.start(ctx) }

// stop shuts the host down: systemd-nspawn turns SIGTERM into an orderly
// shutdown of the container; a host still up after 30s is killed.
func (m *Machine) stop() error {
	if m.cmd == nil || m.exited == nil {
		return nil
	}
	select {
	case <-m.exited:
		return nil
	default:
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		return nil
	case <-time.After(30 * time.Second):
	}
	if m.leader > 0 {
		syscall.Kill(m.leader, syscall.SIGKILL)
	}
	m.cmd.Process.Kill()
	select {
	case <-m.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s: systemd-nspawn (pid %d) did not exit", m.Name, m.cmd.Process.Pid)
	}
}
