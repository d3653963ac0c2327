package enrol

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/testutil/badkeys"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/spool"
)

// A host that writes its join request by hand, with an age key of low
// order (age parses it; nothing can be sealed to it) or with a signing key
// of small order (the request's signature is forged, as anyone could forge
// that host's reports), is refused at admission, naming the key. The
// refusals are recorded, and a sound request admitted in the same run.
func TestAdmitRefusesKeysThatCannotBeTrusted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	meshRcpt := f.m.Pair.Age.Recipient()

	lowTok := f.issue(IssueOptions{Name: "low-1"})
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	low := pair.Public()
	low.Age = badkeys.LowOrderAge[0]
	lowData, lowFP := craftJoin(t, lowTok, low, func(req JoinRequest, c bundle.Context) []byte {
		data, err := bundle.SealTOML(req, c, pair.Sign, meshRcpt)
		if err != nil {
			t.Fatal(err)
		}
		return data
	})
	f.put(spool.JoinName(lowTok.ID(), lowFP), lowData)

	smallTok := f.issue(IssueOptions{Name: "small-1"})
	other, _ := keys.Generate()
	small := keys.Public{Age: other.Public().Age, Sign: keys.EncodeSignPublic(badkeys.Identity())}
	smallData, smallFP := craftJoin(t, smallTok, small, func(req JoinRequest, c bundle.Context) []byte {
		// Signed with any key, then given the small-order signer and a
		// signature that verifies without its private key.
		_, any, _ := ed25519.GenerateKey(rand.Reader)
		signed, err := bundle.SignTOML(req, c, any)
		if err != nil {
			t.Fatal(err)
		}
		return badkeys.ForgeSealed(signed, meshRcpt)
	})
	f.put(spool.JoinName(smallTok.ID(), smallFP), smallData)

	goodTok := f.issue(IssueOptions{Name: "good-1"})
	good := f.join("good", goodTok, tJoin)

	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != 1 || res.Admitted[0].NodeID != good.NodeID {
		t.Errorf("admitted %+v, want good-1 only", res.Admitted)
	}
	want := map[string]string{lowFP: low.Age, smallFP: small.Sign}
	if len(res.Refused) != 2 {
		t.Fatalf("refused %+v, want the two hand-made requests", res.Refused)
	}
	for _, r := range res.Refused {
		key := want[r.HostFP]
		if key == "" || !strings.Contains(r.Reason, "cannot be trusted") || !strings.Contains(r.String(), key) {
			t.Errorf("refusal %q, want one naming the key %s", r, key)
		}
		if reg.Identities[r.HostFP] != nil {
			t.Errorf("identity %s was admitted", r.HostFP)
		}
	}
	// The refusals are recorded, so the next admit has nothing to decide.
	reg = f.registry()
	if reg.Refused[lowTok.ID()+"/"+lowFP] == nil || reg.Refused[smallTok.ID()+"/"+smallFP] == nil {
		t.Errorf("refusals not recorded: %v", reg.Refused)
	}
	if res, _ := f.admit(tAdmit.Add(time.Minute)); len(res.Admitted)+len(res.Refused) != 0 {
		t.Errorf("admit again: %+v", res)
	}
}

// craftJoin makes a join request for tok carrying host keys, proved with
// the token, sealed by seal.
func craftJoin(t *testing.T, tok *token.Token, host keys.Public, seal func(JoinRequest, bundle.Context) []byte) ([]byte, string) {
	t.Helper()
	req := JoinRequest{Version: recordVersion, TokenID: tok.ID(), Name: tok.Name, Host: host, Time: tJoin}
	req.Proof = encodeSig(tok.ProofKey(), proofMessage(req.TokenID, req.Name, req.Host))
	fp := host.Fingerprint()
	return seal(req, joinCtx(tok.ID(), fp)), fp
}

// A spool whose published mesh keys were made by hand, with a signing key
// of small order (so its declarations could be forged by anyone) or an age
// key of low order, is refused at join, naming the key, even though the
// token pins exactly those keys. Nothing is left behind.
func TestJoinRefusesMeshKeysThatCannotBeTrusted(t *testing.T) {
	t.Parallel()
	real, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		keys keys.Public
		sign func(signed []byte) []byte
	}{
		{"small-order signing key", keys.Public{Age: real.Public().Age, Sign: keys.EncodeSignPublic(badkeys.Identity())}, badkeys.ForgeSigned},
		{"low-order age key", keys.Public{Age: badkeys.LowOrderAge[1], Sign: real.Public().Sign}, func(b []byte) []byte { return b }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			sp := filepath.Join(f.dir, "crafted")
			if err := os.Mkdir(sp, 0o755); err != nil {
				t.Fatal(err)
			}
			signed, err := bundle.SignTOML(mesh.Published{Keys: c.keys, Created: t0},
				bundle.Context{Kind: "mesh-keys", Name: mesh.KeysObject}, real.Sign)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(sp, filepath.Dir(mesh.KeysObject)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sp, mesh.KeysObject), c.sign(signed), 0o644); err != nil {
				t.Fatal(err)
			}
			// The published keys are accepted as far as their signature
			// and fingerprint go: the refusal is of the keys.
			data, _ := os.ReadFile(filepath.Join(sp, mesh.KeysObject))
			if _, err := mesh.VerifyPublished(data, c.keys.Fingerprint()); err != nil {
				t.Fatalf("test bug: crafted mesh keys do not verify: %v", err)
			}
			tok, err := token.New("web-1", c.keys.Fingerprint(), t0.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			state, config := f.hostDirs("a")
			_, err = Join(f.ctx, JoinOptions{Token: tok.String(), Spool: sp, Config: config, State: state,
				Root: f.root, Version: "test", Now: tJoin})
			bad := c.keys.Sign
			if c.keys.Age != real.Public().Age {
				bad = c.keys.Age
			}
			if fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "mesh keys") {
				t.Fatalf("join: %v, want a refusal naming %s", err, bad)
			}
			if exists(state) || exists(config) {
				t.Error("a refused join left files behind")
			}
		})
	}
}

// A host whose new key pair cannot be trusted says so at join instead of
// sending a request the mesh would refuse. Key generation is replaced for
// this test (a real generator never makes such a key), so it does not run
// in parallel.
func TestJoinRefusesItsOwnKeysThatCannotBeTrusted(t *testing.T) {
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	defer func(g func() (*keys.Pair, error)) { generateKeys = g }(generateKeys)
	generateKeys = func() (*keys.Pair, error) {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return nil, err
		}
		// The private half's seed with a public half of small order, as
		// a broken generator might pair them.
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		copy(priv[32:], badkeys.Identity())
		return &keys.Pair{Age: id, Sign: priv}, nil
	}
	_, err := f.tryJoin("a", tok.String(), tJoin, false)
	want := keys.EncodeSignPublic(badkeys.Identity())
	if fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), want) {
		t.Fatalf("join: %v, want a refusal naming %s", err, want)
	}
	state, config := f.hostDirs("a")
	if exists(state) || exists(config) || count(t, f, spool.EnrolJoinPrefix) != 0 {
		t.Error("a refused join left files or a join request behind")
	}
}
