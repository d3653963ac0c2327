package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/mesh"
)

// openMesh opens the mesh directory.
func openMesh(env *Env) (*mesh.Mesh, error) {
	return mesh.Open(env.Ctx, env.Global.Mesh, env.Global.Spool)
}

// openHost loads the host config and identity.
func openHost(env *Env) (*host.Config, *host.Identity, error) {
	cfg, err := host.LoadConfig(env.Global.Config)
	if err != nil {
		return nil, nil, err
	}
	if env.Changed("state") {
		cfg.State = env.Global.State
	}
	if env.Changed("spool") {
		cfg.Spool = env.Global.Spool
	}
	if env.Changed("root") {
		cfg.Root = env.Global.Root
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if fi, err := os.Stat(cfg.Root); err != nil || !fi.IsDir() {
		return nil, nil, fault.WithHint(fault.Usagef("root directory %s does not exist", cfg.Root),
			"give the directory the host's files are under (an image being built), or make it first")
	}
	id, err := host.LoadIdentity(cfg)
	return cfg, id, err
}

// previewAdmit decides pending join requests as admitPending would, writes
// nothing, and says on stderr what a real run would decide.
func previewAdmit(env *Env, m *mesh.Mesh) (*enrol.Registry, error) {
	return decidePending(env, m, true)
}

// admitPending runs the implicit admission of declare and report and says
// what it decided on stderr.
func admitPending(env *Env, m *mesh.Mesh) (*enrol.Registry, error) {
	return decidePending(env, m, false)
}

// decidePending is admitPending, or with dry previewAdmit: the same
// decisions, said the same way, the dry run's as what it would do.
func decidePending(env *Env, m *mesh.Mesh, dry bool) (*enrol.Registry, error) {
	decide, admit, refuse := enrol.Admit, "admitted", ""
	if dry {
		decide, admit, refuse = enrol.PreviewAdmit, "dry run: would admit", "dry run: would refuse: "
	}
	res, reg, err := decide(env.Ctx, m, env.Now())
	if err != nil {
		return nil, err
	}
	env.Warn(reg.Warnings)
	env.Warn(reg.Skipped)
	for _, a := range res.Admitted {
		fmt.Fprintf(env.Stdio.Err, "muster: %s %s as identity %s%s\n", admit, a.Name, a.NodeID, replacesNote(a.Replaces))
	}
	for _, r := range res.Refused {
		env.Warnf("%s%s", refuse, r)
	}
	return reg, nil
}

func replacesNote(old string) string {
	if old == "" {
		return ""
	}
	return " (identity " + old + " revoked)"
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := raw(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// isTerminalIn reports whether r is a terminal.
func isTerminalIn(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// when shows a time as absolute UTC and its age, with no threshold.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC") + " (" + ago(now.Sub(t)) + ")"
}

// ago is how long ago d was, in one short phrase: "3 d ago".
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "in the future"
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d d ago", int(d.Hours()/24))
}

// labelsString renders labels as k=v,k=v in key order.
func labelsString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sortStrings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// newestBriefings reads each trusted node's newest briefing and warns about
// briefings refused because their identity was revoked.
func newestBriefings(env *Env, m *mesh.Mesh, reg *enrol.Registry) (map[string]*brief.Briefing, error) {
	briefs, refused, err := reg.Briefings(env.Ctx, m)
	if err != nil {
		return nil, err
	}
	env.Warn(refused)
	return briefs, nil
}

// openAdmitted opens the mesh and its registry with pending join requests
// admitted: a host that joined counts as enrolled.
func openAdmitted(env *Env) (*mesh.Mesh, *enrol.Registry, error) {
	m, err := openMesh(env)
	if err != nil {
		return nil, nil, err
	}
	reg, err := admitPending(env, m)
	if err != nil {
		return nil, nil, err
	}
	return m, reg, nil
}

// readOnlyAdmit is the registry as it is, for commands that read the mesh
// and must not change it (report, enrol list, brief list and show):
// admission is enrol admit's and declare's, so a monitoring job never
// admits a host. Join requests waiting are counted on stderr.
func readOnlyAdmit(env *Env, m *mesh.Mesh) (*enrol.Registry, error) {
	reg, tell, err := startReadOnlyAdmit(env, m)
	if err != nil {
		return nil, err
	}
	tell()
	return reg, nil
}

// startReadOnlyAdmit is readOnlyAdmit with the join requests still pending
// counted in the background, while the caller goes on with the registry
// (report reads the fleet meanwhile: at 100,000 nodes the count stats a
// directory for each token). tell waits for the count and says it, after
// the registry's warnings, to which counting can add (a registry cache
// that could not be written).
func startReadOnlyAdmit(env *Env, m *mesh.Mesh) (reg *enrol.Registry, tell func(), err error) {
	reg, err = enrol.LoadRegistry(env.Ctx, m)
	if err != nil {
		return nil, nil, err
	}
	type count struct {
		n   int
		err error
	}
	counted := make(chan count, 1)
	go func() {
		n, err := enrol.Pending(env.Ctx, m, reg)
		counted <- count{n, err}
	}()
	return reg, func() {
		c := <-counted
		env.Warn(reg.Warnings)
		env.Warn(reg.Skipped)
		if c.err == nil && c.n > 0 {
			waits := "waits"
			if c.n > 1 {
				waits = "wait"
			}
			fmt.Fprintf(env.Stdio.Err, "muster: %s %s to be admitted (muster enrol admit, or the next declare)\n", plural(c.n, "join request"), waits)
		}
	}, nil
}

// openFleet is what the mesh commands that read start with: the mesh, its
// registry as it is (nothing admitted), and every node's newest briefing.
func openFleet(env *Env) (*mesh.Mesh, *enrol.Registry, map[string]*brief.Briefing, error) {
	return openFleetWith(env, readOnlyAdmit)
}

// openFleetWith is openFleet with admit deciding the pending join
// requests: admitPending, or previewAdmit for a run that writes nothing.
func openFleetWith(env *Env, admit func(*Env, *mesh.Mesh) (*enrol.Registry, error)) (*mesh.Mesh, *enrol.Registry, map[string]*brief.Briefing, error) {
	m, err := openMesh(env)
	if err != nil {
		return nil, nil, nil, err
	}
	reg, err := admit(env, m)
	if err != nil {
		return nil, nil, nil, err
	}
	briefs, err := newestBriefings(env, m, reg)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, reg, briefs, nil
}

// daysFlag is a duration flag for a validity period: a duration as Go
// gives it ("36h", "90m"), or whole days ("7d"), the unit validity
// periods are thought in.
type daysFlag time.Duration

func (d *daysFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days uint64
		days, err = strconv.ParseUint(n, 10, 16)
		v = time.Duration(days) * 24 * time.Hour
	}
	if err != nil {
		return fmt.Errorf(`want a duration such as "90m", "36h" or "7d"`)
	}
	*d = daysFlag(v)
	return nil
}

// String gives whole days as days, as they are most often given.
func (d *daysFlag) String() string {
	v := time.Duration(*d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	return v.String()
}

func (d *daysFlag) Type() string { return "duration" }
