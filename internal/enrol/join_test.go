package enrol

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/spool"
)

func TestJoinCreatesPrivateIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	// Whitespace around a pasted token, and a line wrapped by a
	// terminal, are accepted.
	s := tok.String()
	pasted := "\n  " + s[:40] + "\n" + s[40:] + "  \r\n"
	j, err := f.tryJoin("a", pasted, tJoin, false)
	if err != nil {
		t.Fatal(err)
	}
	state, config := f.hostDirs("a")
	modes := map[string]os.FileMode{state: 0o700, filepath.Join(state, "host.age"): 0o600, filepath.Join(state, "host.sign"): 0o600, filepath.Join(state, "mesh.pub"): 0o600, filepath.Join(state, "host.sign.pub"): 0o600}
	for p, want := range modes {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, st.Mode().Perm(), want)
		}
	}
	cfg, id := f.identity("a")
	if cfg.Node != "web-1" || cfg.State != state || cfg.Spool != f.m.Spool.(*spool.Dir).Path() {
		t.Errorf("host config %+v", cfg)
	}
	if id.Mesh != f.m.Public() || id.NodeID() != j.NodeID {
		t.Errorf("pinned mesh keys %v, node id %s; want %v, %s", id.Mesh, id.NodeID(), f.m.Public(), j.NodeID)
	}
	if !exists(config) {
		t.Error("no host config written")
	}
	// The join request and a briefing are in the spool.
	for _, name := range []string{spool.JoinName(tok.ID(), j.NodeID)} {
		if _, err := f.m.Spool.Stat(f.ctx, name); err != nil {
			t.Error(err)
		}
	}
	if n := count(t, f, spool.BriefPrefix+j.NodeID+"/"); n != 1 {
		t.Errorf("%d briefings sent at join, want 1", n)
	}
}

// Joining over an identity is refused unless forced; forced, it replaces
// the identity, and if the forced join fails the old identity is back.
func TestJoinOverAnIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	firstToken := f.issue(IssueOptions{Name: "web-1"})
	first := f.join("a", firstToken, tJoin)
	state, config := f.hostDirs("a")
	keyBefore, err := os.ReadFile(filepath.Join(state, "host.sign"))
	if err != nil {
		t.Fatal(err)
	}
	configBefore, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	tok := f.issue(IssueOptions{Name: "web-2"})
	if _, err := f.tryJoin("a", tok.String(), tJoin, false); err == nil || !strings.Contains(fault.HintOf(err), "--force") {
		t.Fatalf("join over an identity: %v, want a refusal hinting at --force", err)
	}
	unchanged := func(when string) {
		t.Helper()
		key, _ := os.ReadFile(filepath.Join(state, "host.sign"))
		cfg, _ := os.ReadFile(config)
		if !bytes.Equal(key, keyBefore) || !bytes.Equal(cfg, configBefore) {
			t.Errorf("%s: the host's identity or config changed", when)
		}
		if _, id := f.identity("a"); id.NodeID() != first.NodeID {
			t.Errorf("%s: the host is %s, want %s", when, id.NodeID(), first.NodeID)
		}
		entries, _ := os.ReadDir(state)
		if len(entries) != 5 {
			t.Errorf("%s: the state directory holds %v, want the keys, host.sign.pub, mesh.pub and join.toml", when, entries)
		}
		if tid, err := host.ReadJoin(state); tid != firstToken.ID() {
			t.Errorf("%s: the host records token %s (%v), want %s", when, tid, err, firstToken.ID())
		}
	}
	unchanged("refused join")
	// A forced join that fails when it writes to the spool: a file
	// stands where the briefings directory would be.
	broken := filepath.Join(f.dir, "broken-spool")
	if err := os.MkdirAll(filepath.Join(broken, "mesh"), 0o755); err != nil {
		t.Fatal(err)
	}
	keysObj, err := os.ReadFile(filepath.Join(f.m.Spool.(*spool.Dir).Path(), "mesh", "keys"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "mesh", "keys"), keysObj, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "brief"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	_, err = Join(f.ctx, JoinOptions{Token: tok.String(), Spool: broken, Config: config, State: state, Root: f.root, Force: true, Version: "test", Now: tJoin})
	if err == nil {
		t.Fatal("join into a broken spool succeeded")
	}
	unchanged("failed forced join")
	// A forced join that succeeds replaces the identity.
	second, err := f.tryJoin("a", tok.String(), tJoin, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, id := f.identity("a"); id.NodeID() != second.NodeID || second.NodeID == first.NodeID {
		t.Errorf("after a forced join the host is %s, want a new identity %s", id.NodeID(), second.NodeID)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 5 {
		t.Errorf("after a forced join the state directory holds %v, want the keys, host.sign.pub, mesh.pub and join.toml", entries)
	}
	if tid, err := host.ReadJoin(state); tid != tok.ID() {
		t.Errorf("after a forced join the host records token %s (%v), want %s", tid, err, tok.ID())
	}
}

// A join that fails leaves nothing behind on the host.
func TestFailedJoinLeavesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	// A token from another mesh: the spool's keys are not the ones it
	// pins.
	g := newFixture(t)
	foreign := g.issue(IssueOptions{Name: "web-1"})
	_, err := f.tryJoin("a", foreign.String(), tJoin, false)
	if fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), "the token was issued by mesh") {
		t.Errorf("join with another mesh's token: %v, want refused", err)
	}
	// The spool cannot take the briefing.
	if err := os.WriteFile(filepath.Join(f.m.Spool.(*spool.Dir).Path(), "brief"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tryJoin("a", tok.String(), tJoin, false); err == nil {
		t.Fatal("join into a spool that cannot take the briefing succeeded")
	}
	state, config := f.hostDirs("a")
	if exists(config) || exists(state) {
		t.Error("a failed join left identity or config files behind")
	}
	if n := count(t, f, spool.EnrolJoinPrefix); n != 0 {
		t.Errorf("a failed join wrote %d join requests", n)
	}
}

// A host sees its own join request in the spool: pending until an admit
// decides it, then refused with the mesh's reason, which is sealed to the
// host too; an admitted host has nothing to hear about its join.
func TestReadJoinState(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	f.join("a", tok, tJoin)
	f.join("b", tok, tJoin.Add(time.Second)) // the token is spent by a
	state := func(h string) *JoinState {
		t.Helper()
		cfg, id := f.identity(h)
		tid, err := host.ReadJoin(cfg.State)
		if tid != tok.ID() {
			t.Fatalf("host %s recorded token %q (%v), joined with %s", h, tid, err, tok.ID())
		}
		st, err := ReadJoinState(f.ctx, f.m.Spool, id, tid)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, h := range []string{"a", "b"} {
		if st := state(h); st == nil || !st.Pending || st.Refused {
			t.Errorf("host %s before admission: %+v, want pending", h, st)
		}
	}
	f.admit(tAdmit)
	if st := state("a"); st != nil {
		t.Errorf("admitted host a: %+v, want nothing to say", st)
	}
	st := state("b")
	if st == nil || !st.Refused || !strings.HasPrefix(st.Reason, "token already used: it admitted web-1") {
		t.Fatalf("refused host b: %+v, want the mesh's reason", st)
	}
	if !strings.Contains(st.String(), "the mesh refused this host's join request (token "+tok.ID()+"): token already used") {
		t.Errorf("message %q", st)
	}
	// The mesh still reads the refusal it sealed to the host too.
	if reg := f.registry(); len(reg.Refused) != 1 {
		t.Errorf("the mesh reads %d refusals, want 1", len(reg.Refused))
	}
}
