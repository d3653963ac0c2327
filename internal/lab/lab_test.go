package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/testutil/s3server"
)

// The one change the lab makes to what the package ships: the timer runs
// a second after it is started and every 5 seconds, instead of every 15
// minutes (an empty On...Sec= resets all of the shipped ones).
const timerDropIn = `[Timer]
OnBootSec=
OnUnitActiveSec=
OnActiveSec=1s
OnUnitActiveSec=5s
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

// gated declares, for one node, a unit whose start waits until the lab
// creates /run/labd-gate/open inside it: the lab holds that node's apply
// there, after it read its declaration and before it sends its report.
func gated(node string) string {
	return fmt.Sprintf(`
[role.gate]
nodes = [%q]

[role.gate.file."/etc/systemd/system/labd-gate.service"]
content = """
[Service]
Type=notify
ExecStartPre=/bin/sh -c 'until [ -e /run/labd-gate/open ]; do sleep 0.2; done'
ExecStart=/usr/bin/labd /etc/labd/other.conf /run/labd-gate.sock
"""

[role.gate.service."labd-gate.service"]
running = true
`, node)
}

// TestLab boots a fleet of Debian hosts with systemd and runs muster's
// story on them for real, with a directory spool bound into every host
// and, at the same time, with an S3 spool (versitygw on loopback): see
// the steps below and README's "Run it on real machines". It is skipped
// only where containers cannot boot, saying why.
func TestLab(t *testing.T) {
	if why := CanBoot(); why != "" {
		t.Skip("lab: " + why)
	}
	// The lab's own deadline comes before the test binary's, whose
	// timeout would end the process without any clean-up.
	deadline := time.Now().Add(25 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-time.Minute).Before(deadline) {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	// A Ctrl-C ends the test where it is, through its clean-ups.
	ctx, stop := Interruptible(ctx)
	t.Cleanup(stop)
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
		bench:      filepath.Join(art, "systemd.test"),
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
	buildTest(t, arts.bench, "./internal/resource/systemd")
	t.Logf("lab: muster %s, its packages and the services benchmark built after %s", v0, time.Since(start).Round(time.Second))

	// The two runs share nothing but the image; they run side by side.
	t.Run("directory-spool", func(t *testing.T) {
		t.Parallel()
		scenario(ctx, t, image, arts, false)
	})
	t.Run("s3-spool", func(t *testing.T) {
		t.Parallel()
		scenario(ctx, t, image, arts, true)
	})
}

type artifacts struct {
	v0, v1, v2, v3 string
	mesh           string // muster for the mesh side
	labd, v0Deb    string
	musterDebs     map[string]string
	bench          string // the test binary of internal/resource/systemd
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
	// Runs before the lab closes: what the hosts' timers did, when a
	// check failed.
	t.Cleanup(f.dumpOnFailure)
	if err := os.MkdirAll(f.work, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := "dir"
	meshSpool := filepath.Join(l.Dir, "spool")
	// Where a host finds its spool, and for the directory spool, the
	// "disk" it mounts there.
	const hostSpool, spoolDisk = "/srv/spool", "/mnt/spool-disk"
	var srv *s3server.Server
	if s3 {
		prefix = "s3"
		srv = s3server.Start(t)
		t.Cleanup(AtSignal(srv.Stop))
		meshSpool = srv.URL("fleet")
	} else if err := os.MkdirAll(meshSpool, 0o755); err != nil {
		t.Fatal(err)
	}
	f.env = []string{"MUSTER_MESH=" + filepath.Join(f.work, "keys"), "MUSTER_SPOOL=" + meshSpool}
	if s3 {
		f.env = append(f.env, srv.Env(t)...)
	}
	f.mesh("init")
	f.mesh("spool", "repo", "add", a.labd, a.v0Deb, a.musterDebs[a.v1], a.musterDebs[a.v2], a.musterDebs[a.v3])

	// Three hosts; the third keeps its state out of the default place.
	for i := range 3 {
		name := fmt.Sprintf("%s-%d", prefix, i+1)
		h := &host{state: "/var/lib/muster", spool: hostSpool}
		if i == 2 {
			h.state = "/srv/muster-state"
		}
		var binds []string
		if s3 {
			h.spool = meshSpool
		} else {
			// The mesh's spool directory appears in the host as a disk
			// would, and the host mounts it on its spool directory with a
			// bind mount of its own, from its fstab: unmounting that
			// leaves the empty mount point a stick or share that went
			// away leaves.
			binds = append(binds, meshSpool+":"+spoolDisk)
		}
		m, err := l.Boot(ctx, name, binds...)
		if err != nil {
			t.Fatal(err)
		}
		h.Machine = m
		f.hosts = append(f.hosts, h)
		if !s3 {
			f.sh(h, "mkdir -p "+hostSpool+" && echo '"+spoolDisk+" "+hostSpool+" none bind 0 0' >> /etc/fstab && systemctl daemon-reload && mount "+hostSpool)
		}
	}
	t.Logf("lab: %d hosts booted, systemd running as PID 1 in each, after %s", len(f.hosts), time.Since(begin).Round(time.Second))

	f.step(1, "the package, the join, the timer")
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
		f.check(f.version(h) == a.v0, h.Name+": muster version inside says "+a.v0)
		if s3 {
			// Where the timer's service finds the spool's credentials: a
			// service has no HOME.
			creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s3server.AccessKey, s3server.SecretKey)
			writeIn(t, h, "/etc/muster/aws-credentials", creds, 0o600)
			writeIn(t, h, "/etc/default/muster", "AWS_SHARED_CREDENTIALS_FILE=/etc/muster/aws-credentials\nAWS_CONFIG_FILE=/etc/muster/aws-config\n", 0o644)
		}
		// Every timer run reports, so that the lab sees each one: a host
		// otherwise sends a run with nothing new once an hour.
		writeIn(t, h, "/etc/muster/muster.toml", "[report]\ncontact_interval = \"0s\"\n", 0o644)
		token := f.mesh("enrol", "issue", h.Name)
		join := "set -a; [ ! -r /etc/default/muster ] || . /etc/default/muster; exec muster enrol join --spool " + shellQuote(h.spool)
		if h.state != "/var/lib/muster" {
			join += " --state " + h.state
		}
		if _, err := h.RunInput(ctx, strings.NewReader(token), "/bin/sh", "-c", join); err != nil {
			t.Fatal(err)
		}
		f.check(true, h.Name+": muster enrol join read its token from standard input")
		writeIn(t, h, "/etc/systemd/system/muster-apply.timer.d/lab.conf", timerDropIn, 0o644)
		f.in(h, "systemctl", "daemon-reload")
		f.in(h, "systemctl", "enable", "--now", "muster-apply.timer")
		f.check(f.state(h, "is-enabled", "muster-apply.timer") == "enabled", h.Name+": the shipped muster-apply.timer is enabled")
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
	declare := func(s, version string) uint64 {
		return f.declare(map[string]string{"site.toml": s, "upgrade.toml": upgrade(version)})
	}

	f.step(2, "a file, a directory, a symlink, a packaged daemon and its service, applied by the timer")
	gen := declare(site("hello", "blue", ""), a.v0)
	f.applied(gen)
	pids := map[string]string{}
	others := map[string]string{}
	for _, h := range f.hosts {
		for _, u := range []string{"labd.service", "labd-other.service"} {
			st := f.unit(h, u)
			f.check(st["ActiveState"] == "active" && st["UnitFileState"] == "enabled", h.Name+": "+u+" is active and enabled", st)
		}
		f.check(f.state(h, "is-active", "labd.service") == "active", h.Name+": systemctl is-active labd.service says active")
		f.check(f.state(h, "is-enabled", "labd.service") == "enabled", h.Name+": systemctl is-enabled labd.service says enabled")
		ans := f.ask(h, "/run/labd.sock")
		f.check(field(ans, "config") == "hello" && field(ans, "colour") == "blue", h.Name+": labd answers with its config and its drop-in's colour", ans)
		pids[h.Name] = field(ans, "pid")
		others[h.Name] = field(f.ask(h, "/run/labd-other.sock"), "pid")
		f.check(f.in(h, "readlink", "/etc/labd/current.conf") == "/etc/labd/labd.conf", h.Name+": the symlink points where declared")
		f.check(f.in(h, "stat", "-c", "%a %F", "/etc/labd") == "755 directory", h.Name+": the directory is there, mode 0755")
		f.check(f.in(h, "cat", "/etc/labd/labd.conf") == "hello", h.Name+": the file holds what was declared")
		f.check(f.in(h, "dpkg-query", "-W", "-f", "${Version}", "labd") == "1.0", h.Name+": labd 1.0 is installed from the spool's repository")
		f.check(f.state(h, "is-active", "muster-apply.timer") == "active", h.Name+": the timer is active")
		f.check(!strings.Contains(f.journal(h, time.Time{}), "muster-apply.service: Start request repeated too quickly"), h.Name+": the timer's starts never hit the service's start limit")
	}

	f.step(3, "a changed config restarts its daemon and nothing else; drift; a unit that cannot start")
	gen = declare(site("bonjour", "green", ""), a.v0)
	f.applied(gen)
	for _, h := range f.hosts {
		ans := f.ask(h, "/run/labd.sock")
		f.check(field(ans, "pid") != pids[h.Name] && field(ans, "config") == "bonjour", h.Name+": labd restarted (PID "+pids[h.Name]+" → "+field(ans, "pid")+") with the new config", ans)
		f.check(field(ans, "colour") == "green", h.Name+": labd runs the changed drop-in (daemon-reload before the restart)", ans)
		f.check(f.unit(h, "labd.service")["NeedDaemonReload"] == "no", h.Name+": systemd runs labd's current definition (NeedDaemonReload=no)")
		other := field(f.ask(h, "/run/labd-other.sock"), "pid")
		f.check(other == others[h.Name], h.Name+": labd-other was not restarted (PID "+others[h.Name]+")", other)
	}
	// Drift: stopped by hand, and its link removed by hand (which
	// systemd does not notice until a reload), both repaired by the next
	// timer run.
	// A run that started before the drift may end after it, with nothing
	// to repair: only a run that started after it counts.
	for _, h := range f.hosts {
		f.in(h, "systemctl", "stop", "labd.service")
		f.in(h, "rm", "/etc/systemd/system/multi-user.target.wants/labd.service")
		h.mark = time.Now()
	}
	r := f.await(gen, "the runs after labd was stopped by hand", func(n node) bool {
		return n.Report != nil && n.Report.Start.After(f.host(n.Name).mark)
	})
	for _, h := range f.hosts {
		f.check(f.state(h, "is-active", "labd.service") == "active", h.Name+": labd, stopped by hand, was started by the next timer run")
		log := f.journal(h, h.mark)
		f.check(strings.Contains(log, "changed  service:labd.service: started"), h.Name+": that run said the line changed (started)", lastLines(log, 8))
		f.check(f.state(h, "is-enabled", "labd.service") == "enabled" && strings.Contains(log, "enabled (found disabled by the read-back: a link changed by hand)"),
			h.Name+": and enabled it again, its link removed by hand found by the read-back", lastLines(log, 8))
		f.check(r[h.Name].Status == "applied", h.Name+": and the mesh shows generation "+fmt.Sprint(gen)+" applied", r[h.Name].Status)
	}
	// A unit that cannot start fails its line with systemd's reason.
	gen = declare(site("bonjour", "green", broken), a.v0)
	r = f.await(gen, "a report", func(n node) bool { return n.Status == "failed" })
	for _, h := range f.hosts {
		f.check(r[h.Name].failed("service:labd-broken.service", "labd-broken.service failed because the control process exited with error code"),
			h.Name+": labd-broken's line failed with systemd's reason (muster report)", r[h.Name].FailedLines)
		f.check(r[h.Name].failed("service:labd-broken.service", "its log: labd: open /etc/labd/missing.conf: no such file or directory"),
			h.Name+": and with the unit's own last words from the journal", r[h.Name].FailedLines)
		f.check(f.state(h, "is-failed", "labd-broken.service") == "failed", h.Name+": systemctl is-failed labd-broken.service says failed")
	}

	f.step(4, "self-upgrade through the timer, with the real /usr/bin/muster")
	for _, h := range f.hosts {
		h.mark = time.Now()
	}
	gen = declare(site("bonjour", "green", ""), a.v1)
	f.applied(gen)
	// The old muster's run reports too, before it exits 7 and the
	// launcher runs the new one: wait for the new one's report.
	r = f.await(gen, "a report by muster "+a.v1, func(n node) bool {
		return n.Report != nil && n.Report.Muster == a.v1
	})
	for _, h := range f.hosts {
		f.check(r[h.Name].Report.Muster == a.v1, h.Name+": the report of generation "+fmt.Sprint(gen)+" is by muster "+a.v1, r[h.Name].Report.Muster)
		f.check(f.version(h) == a.v1, h.Name+": muster version inside says "+a.v1)
		log := f.journal(h, h.mark)
		f.check(strings.Contains(log, "a new muster was installed and passed its self-check: running apply with it"), h.Name+": the old muster exited 7 and the launcher ran the new one", lastLines(log, 8))
	}

	// A version whose self-check fails is put back, and held.
	gen = declare(site("bonjour", "green", ""), a.v2)
	r = f.await(gen, "a report", func(n node) bool { return n.Status == "failed" })
	for _, h := range f.hosts {
		f.check(r[h.Name].failed("package:muster", "failed its self-check"), h.Name+": muster "+a.v2+" failed its self-check (muster report)", r[h.Name].FailedLines)
		f.check(f.in(h, "dpkg-query", "-W", "-f", "${Version}", "muster") == a.v1, h.Name+": dpkg lists "+a.v1+" again")
		f.check(f.version(h) == a.v1, h.Name+": muster version inside says "+a.v1)
		h.seq = r[h.Name].seq()
	}
	r = f.await(gen, "another run", func(n node) bool { return n.seq() > f.host(n.Name).seq })
	for _, h := range f.hosts {
		f.check(r[h.Name].failed("package:muster", "not retried until a newer version is declared"), h.Name+": the next run holds "+a.v2+" back", r[h.Name].FailedLines)
		f.check(f.version(h) == a.v1, h.Name+": muster version inside still says "+a.v1)
	}

	// A version that crashes on every start is rolled back by the
	// launcher after its third failed start. The report of the run that
	// follows the rollback says so in a line of its own; a later one may
	// have taken its place by the time the mesh looks, and says so in the
	// package's line, which holds the version back.
	for _, h := range f.hosts {
		h.mark = time.Now()
	}
	gen = declare(site("bonjour", "green", ""), a.v3)
	rolledBack := func(n node) bool {
		return n.failed("muster:rollback", "muster "+a.v3+" failed to start 3 times in a row") ||
			n.failed("package:muster", "3 failed starts in a row") && n.failed("package:muster", "rolled back to "+a.v1)
	}
	r = f.await(gen, "a report of the rollback", rolledBack)
	for _, h := range f.hosts {
		f.check(rolledBack(r[h.Name]), h.Name+": the report says muster "+a.v3+" was rolled back to "+a.v1+" after 3 failed starts", r[h.Name].FailedLines)
		f.check(f.version(h) == a.v1, h.Name+": muster version inside says "+a.v1+" again")
		f.check(f.in(h, "dpkg-query", "-W", "-f", "${Version}", "muster") == a.v1, h.Name+": dpkg lists "+a.v1+" again")
		log := f.journal(h, h.mark)
		f.check(strings.Count(log, "muster-launch: muster apply did not start: exit status 2") == 3, h.Name+": muster "+a.v3+" crashed on 3 starts", lastLines(log, 20))
		f.check(strings.Contains(log, "failed to start 3 times in a row; restored the known-good muster "+a.v1), h.Name+": muster-launch restored "+a.v1+" after the third", lastLines(log, 20))
		f.check(strings.Contains(log, "muster:rollback"), h.Name+": the restored muster's run reported the rollback in its own line", lastLines(log, 20))
	}
	gen = declare(site("bonjour", "green", ""), a.v1)
	f.applied(gen)

	f.step(5, "a reboot")
	{
		h := f.hosts[1]
		before := f.report(gen)[h.Name]
		if err := h.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		f.check(true, h.Name+": systemctl reboot inside shut it down")
		gen = declare(site("hallo", "green", ""), a.v1)
		missed := gen
		f.applied(gen, f.hosts[0].Name, f.hosts[2].Name)
		r := f.report(gen)
		f.check(r[h.Name].Status == "outstanding", h.Name+": while it is down, the mesh shows it outstanding on generation "+fmt.Sprint(gen), r[h.Name].Status)
		gen = declare(site("hallo", "purple", ""), a.v1)
		f.applied(gen, f.hosts[0].Name, f.hosts[2].Name)
		r = f.report(gen)
		f.check(r[h.Name].Status == "outstanding", h.Name+": and outstanding on generation "+fmt.Sprint(gen)+", never failed", r[h.Name].Status)
		if err := h.Up(ctx); err != nil {
			t.Fatal(err)
		}
		f.check(f.state(h, "is-enabled", "muster-apply.timer") == "enabled" && f.state(h, "is-active", "muster-apply.timer") == "active", h.Name+": booted again, its timer is enabled and active")
		r = f.applied(gen, h.Name)
		if !s3 {
			f.check(f.sh(h, "findmnt -n -o TARGET "+hostSpool) == hostSpool, h.Name+": its fstab mounted the spool again")
		}
		f.check(r[h.Name].NodeID == before.NodeID && !r[h.Name].noted("started without state"), h.Name+": it kept its identity ("+before.NodeID+") and state", r[h.Name].NodeID, r[h.Name].Report.Notes)
		ans := f.ask(h, "/run/labd.sock")
		f.check(field(ans, "config") == "hallo" && field(ans, "colour") == "purple", h.Name+": it caught up on generations "+fmt.Sprint(missed)+" and "+fmt.Sprint(gen)+": labd runs the newest config", ans)
	}

	f.step(6, "the spool goes away and comes back")
	{
		// The run of the newest generation is held at the gate, after it
		// read its declaration; then the spool goes away, and the run
		// goes on without it.
		h := f.hosts[2]
		h.mark = time.Now()
		gen = declare(site("hallo", "purple", gated(h.Name)), a.v1)
		f.until(h, "its run to wait at the gate", func() bool { return f.unit(h, "labd-gate.service")["ActiveState"] == "activating" })
		if s3 {
			srv.Stop()
		} else {
			f.in(h, "umount", hostSpool)
		}
		f.in(h, "mkdir", "-p", "/run/labd-gate")
		f.in(h, "touch", "/run/labd-gate/open")
		f.until(h, "a run after the gated one", func() bool {
			return strings.Count(f.journal(h, h.mark), "Main process exited, code=exited, status=4/") >= 2
		})
		log := f.journal(h, h.mark)
		f.check(strings.Contains(log, "report kept in the outbox, the next apply sends it"), h.Name+": the run the spool went away in kept its report in the outbox and exited 4 (temporary)", lastLines(log, 20))
		if !s3 {
			f.check(strings.Contains(log, "holds no mesh keys"), h.Name+": runs with only the empty mount point exit 4 too, saying the spool holds no mesh keys", lastLines(log, 20))
			f.check(f.sh(h, "ls -A "+hostSpool) == "", h.Name+": nothing was written into the empty mount point")
			r := f.report(gen)
			f.check(r[h.Name].Status == "outstanding", h.Name+": the mesh shows it outstanding on generation "+fmt.Sprint(gen)+", not failed", r[h.Name].Status)
		}
		f.check(f.state(h, "is-active", "labd-gate.service") == "active", h.Name+": that run did its work (labd-gate started)")
		outbox := f.sh(h, "ls "+h.state+"/outbox | wc -l")
		f.check(outbox == "1", h.Name+": its report waits in the outbox, and later runs leave it there", outbox)
		h.mark = time.Now()
		if s3 {
			srv.Restart()
		} else {
			f.in(h, "mount", hostSpool)
		}
		// The run that finds the spool back sends the waiting report
		// first and its own after it, so the mesh may see the waiting one
		// alone for a moment: wait for the run's own.
		f.await(gen, h.Name+"'s report of a run after the spool came back", func(n node) bool { return n.Report != nil && n.Report.End.After(h.mark) }, h.Name)
		r := f.applied(gen, h.Name)
		f.check(r[h.Name].Report.End.After(h.mark), h.Name+": once the spool is back, the mesh has its report of generation "+fmt.Sprint(gen))
		log = f.journal(h, h.mark)
		f.check(strings.Contains(log, "sent 1 earlier report(s) from the outbox"), h.Name+": the waiting report was sent first", lastLines(log, 10))
		outbox = f.sh(h, "ls "+h.state+"/outbox | wc -l")
		f.check(outbox == "0", h.Name+": the outbox is empty", outbox)
	}

	if !s3 {
		f.step(7, "benchmark: 20 services applied with no change, beside one systemctl show of them")
		f.bench(f.hosts[0], a.bench)
	}
	t.Logf("lab: done in %s", time.Since(begin).Round(time.Second))
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
