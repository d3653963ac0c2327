package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/testutil/s3server"
)

// The one change the lab makes to what the package ships: the timer runs
// a second after it is started and every 10 seconds, instead of every 15
// minutes (an empty On...Sec= resets all of the shipped ones).
const timerDropIn = `[Timer]
OnUnitActiveSec=
OnActiveSec=1s
OnUnitActiveSec=10s
RandomizedDelaySec=0
AccuracySec=1s
`

const labdOtherUnit = `[Unit]
Description=a second lab daemon, which nothing in the lab restarts

[Service]
Type=notify
ExecStart=/usr/bin/labd /etc/labd/other.conf /run/labd-other.sock

[Install]
WantedBy=multi-user.target
`

// site is the lab's declaration: a file, a directory, a symlink, a
// package with a daemon and its own unit, a drop-in for that unit, and a
// second daemon whose unit file is declared.
func site(greeting, colour string, extra string) string {
	return fmt.Sprintf(`[role.lab]
nodes = ["*"]

[role.lab.package.labd]
version = "1.0"
order = 20

[role.lab.directory."/etc/labd"]
mode = "0755"

[role.lab.file."/etc/labd/labd.conf"]
content = "%s\n"

[role.lab.symlink."/etc/labd/current.conf"]
target = "/etc/labd/labd.conf"

[role.lab.file."/etc/systemd/system/labd.service.d/colour.conf"]
content = "[Service]\nEnvironment=LABD_COLOUR=%s\n"

[role.lab.service."labd.service"]
enabled = true
running = true
restart_on = ["/etc/labd/labd.conf", "/etc/systemd/system/labd.service.d/colour.conf"]

[role.lab.file."/etc/labd/other.conf"]
content = "other\n"

[role.lab.file."/etc/systemd/system/labd-other.service"]
content = '''
%s'''

[role.lab.service."labd-other.service"]
enabled = true
running = true
restart_on = ["/etc/labd/other.conf"]
%s`, greeting, colour, labdOtherUnit, extra)
}

// broken declares a unit that cannot start: labd refuses a missing config.
const broken = `
[role.lab.file."/etc/systemd/system/labd-broken.service"]
content = """
[Service]
Type=notify
ExecStart=/usr/bin/labd /etc/labd/missing.conf /run/labd-broken.sock
"""

[role.lab.service."labd-broken.service"]
running = true
`

// TestLab boots a fleet of Debian hosts with systemd and runs muster's
// story on them for real, once with a directory spool bound into every
// host and once with an S3 spool (versitygw on loopback): see the steps
// below and README's "Run it on real machines". It is skipped only where
// containers cannot boot, saying why.
func TestLab(t *testing.T) {
	if why := CanBoot(); why != "" {
		t.Skip("lab: " + why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	image, err := Image(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lab: image ready after %s", time.Since(start).Round(time.Second))

	art := t.TempDir()
	v0 := debVersion(t)
	arts := artifacts{
		v0:         v0,
		v1:         v0 + "+lab1",
		v2:         v0 + "+lab2",
		v3:         v0 + "+lab3",
		mesh:       filepath.Join(art, "muster"),
		labd:       labdDeb(t, art),
		v0Deb:      musterDeb(t, art, v0, ""),
		musterDebs: map[string]string{},
	}
	build(t, arts.mesh, "./cmd/muster", v0)
	for v, tag := range map[string]string{arts.v1: "", arts.v2: "labfault_selfcheck", arts.v3: "labfault_crash"} {
		bin := filepath.Join(art, "muster-"+v)
		var tags []string
		if tag != "" {
			tags = []string{tag}
		}
		build(t, bin, "./cmd/muster", v, tags...)
		arts.musterDebs[v] = musterDeb(t, art, v, bin)
	}
	t.Logf("lab: muster %s and its packages built after %s", v0, time.Since(start).Round(time.Second))

	t.Run("directory-spool", func(t *testing.T) { scenario(ctx, t, image, arts, false) })
	t.Run("s3-spool", func(t *testing.T) { scenario(ctx, t, image, arts, true) })
}

type artifacts struct {
	v0, v1, v2, v3 string
	mesh           string // muster for the mesh side
	labd, v0Deb    string
	musterDebs     map[string]string
}

// debVersion is the Debian version make deb gives this checkout.
func debVersion(t *testing.T) string {
	desc, err := exec.Command("git", "-C", moduleRoot, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		desc = []byte("devel")
	}
	out, err := exec.Command(filepath.Join(moduleRoot, "scripts", "deb.sh"), "--print-version", strings.TrimSpace(string(desc))).Output()
	if err != nil {
		t.Fatalf("scripts/deb.sh --print-version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func scenario(ctx context.Context, t *testing.T, image string, a artifacts, s3 bool) {
	begin := time.Now()
	l, err := New(image, "/var/tmp", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab: cleaning up: %v", err)
		}
	})
	f := &fleet{t: t, ctx: ctx, lab: l, work: filepath.Join(l.Dir, "mesh"), bin: a.mesh}
	if err := os.MkdirAll(f.work, 0o755); err != nil {
		t.Fatal(err)
	}
	meshSpool := filepath.Join(l.Dir, "spool-source", "spool")
	hostSpool := "/srv/lab/spool"
	var srv *s3server.Server
	if s3 {
		srv = s3server.Start(t)
		srv.SetEnv(t)
		meshSpool = srv.URL("fleet")
		hostSpool = meshSpool
	} else if err := os.MkdirAll(meshSpool, 0o755); err != nil {
		t.Fatal(err)
	}
	f.env = []string{"MUSTER_MESH=" + filepath.Join(f.work, "keys"), "MUSTER_SPOOL=" + meshSpool}
	f.mesh("init")
	f.mesh("spool", "repo", "add", a.labd, a.v0Deb, a.musterDebs[a.v1], a.musterDebs[a.v2], a.musterDebs[a.v3])

	// Three hosts; the third keeps its state out of the default place.
	names := []string{"lab-1", "lab-2", "lab-3"}
	for i, name := range names {
		h := &host{state: "/var/lib/muster"}
		if i == 2 {
			h.state = "/srv/muster-state"
		}
		var binds []string
		if !s3 {
			h.gate = filepath.Join(l.Dir, "gate-"+name)
			if err := l.Gate(h.gate); err != nil {
				t.Fatal(err)
			}
			if err := l.Attach(filepath.Dir(meshSpool), h.gate); err != nil {
				t.Fatal(err)
			}
			binds = append(binds, h.gate+":/srv/lab")
		}
		m, err := l.Boot(ctx, name, binds...)
		if err != nil {
			t.Fatal(err)
		}
		h.Machine = m
		f.hosts = append(f.hosts, h)
	}
	t.Logf("lab: %d hosts booted, systemd running as PID 1 in each, after %s", len(f.hosts), time.Since(begin).Round(time.Second))

	// 1. The package installs, the host joins with the token on standard
	// input, and the shipped timer runs apply from then on.
	for _, h := range f.hosts {
		deb, err := os.ReadFile(a.v0Deb)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.Path("/root/muster.deb"), deb, 0o644); err != nil {
			t.Fatal(err)
		}
		f.in(h, "dpkg", "-i", "/root/muster.deb")
		f.check(f.in(h, "dpkg-query", "-W", "-f", "${Version}", "muster") == a.v0, h.Name+": dpkg -i installed muster "+a.v0)
		f.check(strings.Fields(f.in(h, "muster", "version"))[1] == a.v0, h.Name+": muster version inside says "+a.v0)
		if s3 {
			// Where the timer's service finds the spool's credentials.
			creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s3server.AccessKey, s3server.SecretKey)
			writeIn(t, h, "/etc/muster/aws-credentials", creds, 0o600)
			writeIn(t, h, "/etc/default/muster", "AWS_SHARED_CREDENTIALS_FILE=/etc/muster/aws-credentials\nAWS_CONFIG_FILE=/etc/muster/aws-config\n", 0o644)
		}
		token := f.mesh("enrol", "issue", h.Name)
		join := "set -a; [ ! -r /etc/default/muster ] || . /etc/default/muster; exec muster enrol join --spool " + shellQuote(hostSpool)
		if h.state != "/var/lib/muster" {
			join += " --state " + h.state
		}
		if _, err := h.RunInput(ctx, strings.NewReader(token), "/bin/sh", "-c", join); err != nil {
			t.Fatal(err)
		}
		writeIn(t, h, "/etc/systemd/system/muster-apply.timer.d/lab.conf", timerDropIn, 0o644)
		f.in(h, "systemctl", "daemon-reload")
		f.in(h, "systemctl", "enable", "--now", "muster-apply.timer")
		f.check(f.in(h, "systemctl", "is-enabled", "muster-apply.timer") == "enabled", h.Name+": muster-apply.timer is enabled")
	}
	// The cron example, copied as its comment says, is a file cron reads
	// (cron.d names follow run-parts' rules: no dots).
	cron := f.sh(f.hosts[0], "mkdir -p /etc/cron.d && cp /usr/share/doc/muster/examples/cron.d/muster-apply /etc/cron.d/ && run-parts --list /etc/cron.d; rm -f /etc/cron.d/muster-apply")
	f.check(strings.Contains(cron, "/etc/cron.d/muster-apply"), "the cron example's name is one cron reads (run-parts --list /etc/cron.d)", cron)

	upgrade := func(version string) string {
		b, err := os.ReadFile(filepath.Join(moduleRoot, "examples", "declaration", "upgrade.toml"))
		if err != nil {
			t.Fatal(err)
		}
		return regexp.MustCompile(`version = "[^"]*"`).ReplaceAllString(string(b), `version = "`+version+`"`)
	}

	// 2. Everything declared, applied by the timer, checked inside.
	gen := f.declare(map[string]string{"site.toml": site("hello", "blue", ""), "upgrade.toml": upgrade(a.v0)})
	f.applied(gen)
	pids := map[string]string{}
	others := map[string]string{}
	for _, h := range f.hosts {
		for _, u := range []string{"labd.service", "labd-other.service"} {
			st := f.unit(h, u)
			f.check(st["ActiveState"] == "active" && st["UnitFileState"] == "enabled", h.Name+": "+u+" is active and enabled", st)
		}
		f.check(f.in(h, "systemctl", "is-active", "labd.service") == "active", h.Name+": systemctl is-active labd.service says active")
		f.check(f.in(h, "systemctl", "is-enabled", "labd.service") == "enabled", h.Name+": systemctl is-enabled labd.service says enabled")
		ans := f.ask(h, "/run/labd.sock")
		f.check(field(ans, "config") == "hello" && field(ans, "colour") == "blue", h.Name+": labd answers with its config and its drop-in's colour", ans)
		pids[h.Name] = field(ans, "pid")
		others[h.Name] = field(f.ask(h, "/run/labd-other.sock"), "pid")
		f.check(f.in(h, "readlink", "/etc/labd/current.conf") == "/etc/labd/labd.conf", h.Name+": the symlink points where declared")
		f.check(f.in(h, "stat", "-c", "%a %F", "/etc/labd") == "755 directory", h.Name+": the directory is there, mode 0755")
		f.check(f.in(h, "cat", "/etc/labd/labd.conf") == "hello", h.Name+": the file holds what was declared")
		f.check(f.in(h, "dpkg-query", "-W", "-f", "${Version}", "labd") == "1.0", h.Name+": labd 1.0 is installed from the spool's repository")
		f.check(f.in(h, "systemctl", "is-active", "muster-apply.timer") == "active", h.Name+": the timer is active")
	}

	// 3. A changed config restarts its daemon and nothing else; a changed
	// drop-in is loaded before the restart.
	gen = f.declare(map[string]string{"site.toml": site("bonjour", "green", ""), "upgrade.toml": upgrade(a.v0)})
	f.applied(gen)
	for _, h := range f.hosts {
		ans := f.ask(h, "/run/labd.sock")
		f.check(field(ans, "pid") != pids[h.Name] && field(ans, "config") == "bonjour", h.Name+": labd restarted (PID "+pids[h.Name]+" → "+field(ans, "pid")+") with the new config", ans)
		f.check(field(ans, "colour") == "green", h.Name+": labd runs the changed drop-in (daemon-reload before the restart)", ans)
		f.check(f.unit(h, "labd.service")["NeedDaemonReload"] == "no", h.Name+": systemd runs labd's current definition (NeedDaemonReload=no)")
		other := field(f.ask(h, "/run/labd-other.sock"), "pid")
		f.check(other == others[h.Name], h.Name+": labd-other was not restarted (PID "+others[h.Name]+")", other)
	}
	if !s3 {
		// Drift: stopped by hand, started by the next timer run.
		h := f.hosts[0]
		seq := f.report(gen)[h.Name].seq()
		f.in(h, "systemctl", "stop", "labd.service")
		f.await(gen, "another run of "+h.Name, func(n node) bool { return n.seq() > seq }, h.Name)
		f.check(f.in(h, "systemctl", "is-active", "labd.service") == "active", h.Name+": labd, stopped by hand, was started by the next timer run")
		log := f.in(h, "journalctl", "-u", "muster-apply.service", "-o", "cat", "--no-pager")
		f.check(strings.Contains(log, "changed  service:labd.service: started"), h.Name+": that run reported the line changed (started)", lastLines(log, 5))

		// A unit that cannot start fails its line with systemd's reason.
		gen = f.declare(map[string]string{"site.toml": site("bonjour", "green", broken), "upgrade.toml": upgrade(a.v0)})
		r := f.await(gen, "a report", func(n node) bool { return n.Status == "failed" })
		for _, h := range f.hosts {
			f.check(r[h.Name].failed("service:labd-broken.service", "labd-broken.service failed because the control process exited with error code"),
				h.Name+": labd-broken's line failed with systemd's reason (muster report)", r[h.Name].FailedLines)
		}
	}

	// 4. Self-upgrade through the timer, with the real /usr/bin/muster.
	if !s3 {
		gen = f.declare(map[string]string{"site.toml": site("bonjour", "green", ""), "upgrade.toml": upgrade(a.v1)})
		r := f.applied(gen)
		for _, h := range f.hosts {
			f.check(r[h.Name].Report.Muster == a.v1, h.Name+": the report of generation "+fmt.Sprint(gen)+" is by muster "+a.v1, r[h.Name].Report.Muster)
			f.check(strings.Fields(f.in(h, "muster", "version"))[1] == a.v1, h.Name+": muster version inside says "+a.v1)
			log := f.in(h, "journalctl", "-u", "muster-apply.service", "-o", "cat", "--no-pager")
			f.check(strings.Contains(log, "a new muster was installed and passed its self-check: running apply with it"), h.Name+": the old muster exited 7 and the launcher ran the new one", lastLines(log, 5))
		}

		// A version whose self-check fails is put back, and held.
		gen = f.declare(map[string]string{"site.toml": site("bonjour", "green", ""), "upgrade.toml": upgrade(a.v2)})
		r = f.await(gen, "a report", func(n node) bool { return n.Status == "failed" })
		for _, h := range f.hosts {
			f.check(r[h.Name].failed("package:muster", "failed its self-check"), h.Name+": muster "+a.v2+" failed its self-check (muster report)", r[h.Name].FailedLines)
			f.check(f.in(h, "dpkg-query", "-W", "-f", "${Version}", "muster") == a.v1, h.Name+": dpkg lists "+a.v1+" again")
			f.check(strings.Fields(f.in(h, "muster", "version"))[1] == a.v1, h.Name+": muster version inside says "+a.v1)
		}
		seqs := map[string]uint64{}
		for n, x := range r {
			seqs[n] = x.seq()
		}
		r = f.await(gen, "another run", func(n node) bool { return n.seq() > seqs[n.Name] })
		for _, h := range f.hosts {
			f.check(r[h.Name].failed("package:muster", "not retried until a newer version is declared"), h.Name+": the next run holds "+a.v2+" back", r[h.Name].FailedLines)
		}

		// A version that crashes on every start is rolled back by the
		// launcher after its third failed start.
		gen = f.declare(map[string]string{"site.toml": site("bonjour", "green", ""), "upgrade.toml": upgrade(a.v3)})
		r = f.await(gen, "a report of the rollback", func(n node) bool { return n.failed("muster:rollback", a.v3) })
		for _, h := range f.hosts {
			f.check(r[h.Name].failed("muster:rollback", "3 failed starts"), h.Name+": the report says muster "+a.v3+" was rolled back after 3 failed starts", r[h.Name].FailedLines)
			f.check(strings.Fields(f.in(h, "muster", "version"))[1] == a.v1, h.Name+": muster version inside says "+a.v1+" again")
			f.check(f.in(h, "dpkg-query", "-W", "-f", "${Version}", "muster") == a.v1, h.Name+": dpkg lists "+a.v1+" again")
			log := f.in(h, "journalctl", "-u", "muster-apply.service", "-o", "cat", "--no-pager")
			f.check(strings.Contains(log, "failed to start 3 times in a row; restored the known-good muster "+a.v1), h.Name+": muster-launch restored "+a.v1, lastLines(log, 5))
		}
		gen = f.declare(map[string]string{"site.toml": site("bonjour", "green", ""), "upgrade.toml": upgrade(a.v1)})
		f.applied(gen)
	}

	// 5. A reboot keeps identity, state and timer; the generations missed
	// meanwhile are outstanding, never failed, and caught up after.
	if !s3 {
		h := f.hosts[1]
		before := f.report(gen)[h.Name]
		if err := h.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		gen = f.declare(map[string]string{"site.toml": site("hallo", "green", ""), "upgrade.toml": upgrade(a.v1)})
		others := []string{f.hosts[0].Name, f.hosts[2].Name}
		f.applied(gen, others...)
		r := f.report(gen)
		f.check(r[h.Name].Status == "outstanding", h.Name+": while it is down, the mesh shows it outstanding on generation "+fmt.Sprint(gen), r[h.Name].Status)
		if err := h.Up(ctx); err != nil {
			t.Fatal(err)
		}
		f.check(f.in(h, "systemctl", "is-active", "muster-apply.timer") == "active", h.Name+": after the reboot the timer is active again")
		r = f.applied(gen, h.Name)
		f.check(r[h.Name].NodeID == before.NodeID && !r[h.Name].noted("started without state"), h.Name+": it kept its identity ("+before.NodeID+") and state", r[h.Name].NodeID)
		f.check(field(f.ask(h, "/run/labd.sock"), "config") == "hallo", h.Name+": it caught up: labd runs the newest config")
	}

	// 6. The spool goes away: the run exits 4 (temporary) and keeps its
	// report in the outbox, which is sent when the spool is back.
	h := f.hosts[2]
	seq := f.report(gen)[h.Name].seq()
	if s3 {
		srv.Stop()
	} else if err := l.Detach(h.gate); err != nil {
		t.Fatal(err)
	}
	f.in(h, "systemctl", "stop", "labd.service") // drift the offline run repairs
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := f.unit(h, "muster-apply.service")
		if st["ExecMainStatus"] == "4" && f.in(h, "systemctl", "is-active", "labd.service") == "active" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("FAIL  %s: no run exited 4 with the spool gone: %v", h.Name, st)
		}
		time.Sleep(time.Second)
	}
	f.check(true, h.Name+": with the spool gone, the timer's run exited 4 (temporary) and still repaired labd")
	outbox := f.sh(h, "ls "+h.state+"/outbox | wc -l")
	f.check(outbox != "0", h.Name+": its report waits in the outbox", outbox)
	if s3 {
		srv.Restart()
	} else if err := l.Attach(filepath.Dir(meshSpool), h.gate); err != nil {
		t.Fatal(err)
	}
	f.await(gen, "the outbox sent", func(n node) bool { return n.seq() > seq+1 }, h.Name)
	outbox = f.sh(h, "ls "+h.state+"/outbox | wc -l")
	f.check(outbox == "0", h.Name+": once the spool is back the outbox was sent", outbox)
	t.Logf("lab: scenario done in %s", time.Since(begin).Round(time.Second))
}

func writeIn(t *testing.T, h *host, path, body string, mode os.FileMode) {
	t.Helper()
	p := h.Path(path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

func lastLines(s string, n int) string {
	return tail([]byte(s), n)
}

var _ = bytes.NewReader
