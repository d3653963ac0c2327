package enrol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/spool"
)

// JoinOptions are the host's side of joining.
type JoinOptions struct {
	Token   string // as pasted; whitespace is ignored
	Spool   string // spool location
	Config  string // host config path to write
	State   string // state directory to create
	Root    string // for the briefing's checks
	Force   bool   // replace an existing identity in State
	Brief   host.BriefConfig
	Version string
	Now     time.Time
}

// JoinResult says what join did.
type JoinResult struct {
	Name     string
	NodeID   string
	Briefing *brief.Briefing
	Warnings []string
}

// Join creates the host's identity, pins the mesh keys the token names,
// writes the host config, sends a briefing and writes the join request. If
// it fails, it leaves the host as it found it: the identity and config it
// wrote are removed, and with Force the identity it replaced is put back.
//
// A host config that already exists at Config (written ahead of enrolment,
// say, to set briefing thresholds) keeps its settings; join fills in the
// spool, node name and state directory. Its spool is used when Spool is
// empty.
func Join(ctx context.Context, o JoinOptions) (*JoinResult, error) {
	// The config outlives this command's working directory.
	for _, p := range []*string{&o.State, &o.Config} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = abs
	}
	prevConfig, err := os.ReadFile(o.Config)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	prev, err := host.ReadConfig(o.Config)
	if err != nil {
		return nil, fault.WithHint(err, "fix the host config, or remove it and let join write a new one")
	}
	if prev == nil {
		prev = &host.Config{}
	}
	if o.Spool == "" {
		o.Spool = prev.Spool
	}
	if o.Spool, err = spool.Absolute(o.Spool); err != nil {
		return nil, err
	}
	tok, err := token.Parse(o.Token)
	if err != nil {
		return nil, fault.WithHint(err, "copy the whole token printed by muster enrol issue, or ask the operator for a new one")
	}
	if !o.Now.Before(tok.Expires) {
		return nil, fault.WithHint(fault.Refusedf("token for %s expired at %s", tok.Name, tok.Expires.Format(time.RFC3339)),
			"ask the operator for a new token: muster enrol issue "+tok.Name)
	}
	if host.HasIdentity(o.State) && !o.Force {
		return nil, fault.WithHint(fmt.Errorf("state directory %s already holds a host identity", o.State),
			"to replace it (its reports will no longer be accepted once the new one is admitted), run join again with --force")
	}
	if o.Spool == "" {
		return nil, fault.Usagef("no spool given: pass --spool SPOOL or set MUSTER_SPOOL")
	}
	sp, err := spool.Open(o.Spool)
	if err != nil {
		return nil, err
	}
	// Pin the mesh keys the token names: the spool's published keys are
	// accepted only if their fingerprint is the one carried by hand.
	data, err := sp.Get(ctx, spool.MeshKeysName, 1<<16)
	if err != nil {
		if errors.Is(err, spool.ErrNotFound) {
			return nil, fmt.Errorf("spool %s has no mesh keys: is it the mesh's spool?", sp)
		}
		return nil, err
	}
	pub, err := mesh.VerifyPublished(data, tok.MeshFingerprint())
	if err != nil {
		return nil, err
	}
	// Keys the mesh could not have made: anyone could sign declarations
	// as the mesh, or nothing could be sealed to it.
	if err := pub.Keys.Vet(); err != nil {
		return nil, fault.WithHint(fmt.Errorf("mesh keys in spool %s: %w", sp, err),
			"do not join this spool: its mesh keys were not made by muster init")
	}
	pair, err := generateKeys()
	if err != nil {
		return nil, err
	}
	// The mesh refuses such keys at admission too; a host that made one
	// says so now instead of waiting to be refused.
	if err := pair.Public().Vet(); err != nil {
		return nil, fault.WithHint(fmt.Errorf("the new host key pair: %w", err), "run join again to make another key pair")
	}
	restore, discard := func() error { return nil }, func() error { return nil }
	if o.Force {
		if restore, discard, err = host.SetIdentityAside(o.State); err != nil {
			return nil, err
		}
	}
	_, err = os.Stat(o.State)
	stateExisted := err == nil
	ok := false
	defer func() {
		if ok {
			return
		}
		host.RemoveIdentity(o.State)
		restore()
		if !stateExisted {
			os.Remove(o.State) // only if empty: it may have been shared
		}
		if prevConfig != nil {
			atomicfile.WriteFile(o.Config, prevConfig, 0o644)
		} else {
			os.Remove(o.Config)
		}
	}()
	if err := host.WriteIdentity(o.State, pair, pub.Keys); err != nil {
		return nil, err
	}
	if err := host.WriteJoin(o.State, tok.ID()); err != nil {
		return nil, err
	}
	cfg := *prev
	cfg.Spool, cfg.Node, cfg.State = o.Spool, tok.Name, o.State
	if o.Root != "" && filepath.Clean(o.Root) != "/" {
		// A host joined for a directory tree (an image) applies to that
		// tree unless told otherwise, never to / by a forgotten flag.
		if cfg.Root, err = filepath.Abs(o.Root); err != nil {
			return nil, err
		}
	}
	if o.Brief != (host.BriefConfig{}) {
		cfg.Brief = o.Brief
	}
	cfg.Brief = cfg.Brief.WithDefaults()
	if err := host.WriteConfig(o.Config, &cfg); err != nil {
		return nil, err
	}
	hostPub := pair.Public()
	nodeID := hostPub.Fingerprint()
	meshRcpt, err := pub.Keys.Recipient()
	if err != nil {
		return nil, err
	}
	b, err := SendBriefing(ctx, sp, &host.Identity{Node: tok.Name, Pair: pair, Mesh: pub.Keys}, brief.Env{
		Node: tok.Name, Root: o.Root, State: o.State, MeshCreated: pub.Created,
		MinFreeStateMB: cfg.Brief.MinFreeStateMB, MinFreeRootMB: cfg.Brief.MinFreeRootMB,
		Version: o.Version, Now: o.Now,
	})
	if err != nil {
		return nil, err
	}
	req := JoinRequest{
		Version: recordVersion,
		TokenID: tok.ID(),
		Name:    tok.Name,
		Host:    hostPub,
		Time:    o.Now.UTC(),
	}
	req.Proof = encodeSig(tok.ProofKey(), proofMessage(req.TokenID, req.Name, req.Host))
	out, err := bundle.SealTOML(req, joinCtx(tok.ID(), nodeID), pair.Sign, meshRcpt)
	if err != nil {
		return nil, err
	}
	if err := sp.Put(ctx, spool.JoinName(tok.ID(), nodeID), out); err != nil {
		return nil, fmt.Errorf("write join request: %w", err)
	}
	ok = true
	res := &JoinResult{Name: tok.Name, NodeID: nodeID, Briefing: b}
	if err := discard(); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the replaced identity's key files could not be removed: %v", err))
	}
	return res, nil
}

// generateKeys makes the host's key pair; tests replace it to make one
// that must be refused.
var generateKeys = keys.Generate

// SendBriefing runs the checks and writes the briefing, signed by the host
// and sealed to the mesh.
func SendBriefing(ctx context.Context, sp spool.Spool, id *host.Identity, env brief.Env) (*brief.Briefing, error) {
	env.Spool = sp
	b := brief.Run(ctx, env)
	if err := brief.Send(ctx, sp, id, b, uint64(env.Now.UnixNano())); err != nil {
		return nil, err
	}
	return b, nil
}
