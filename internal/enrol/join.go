package enrol

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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
}

// Join creates the host's identity, pins the mesh keys the token names,
// writes the host config, sends a briefing and writes the join request. If
// it fails, the identity and config it created are removed again.
func Join(ctx context.Context, o JoinOptions) (*JoinResult, error) {
	// The config outlives this command's working directory.
	for _, p := range []*string{&o.State, &o.Config} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = abs
	}
	if !strings.Contains(o.Spool, "://") && !strings.HasPrefix(o.Spool, "dir:") && o.Spool != "" {
		abs, err := filepath.Abs(o.Spool)
		if err != nil {
			return nil, err
		}
		o.Spool = abs
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
	pair, err := keys.Generate()
	if err != nil {
		return nil, err
	}
	if o.Force {
		if err := host.RemoveIdentity(o.State); err != nil {
			return nil, err
		}
	}
	if err := host.WriteIdentity(o.State, pair, pub.Keys); err != nil {
		return nil, err
	}
	_, configErr := os.Stat(o.Config)
	hadConfig := configErr == nil
	ok := false
	defer func() {
		if !ok {
			host.RemoveIdentity(o.State)
			if !hadConfig {
				os.Remove(o.Config)
			}
		}
	}()
	cfg := &host.Config{Spool: o.Spool, Node: tok.Name, State: o.State, Brief: o.Brief.WithDefaults()}
	if err := host.WriteConfig(o.Config, cfg); err != nil {
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
		MinFreeStateMB: o.Brief.WithDefaults().MinFreeStateMB, MinFreeRootMB: o.Brief.WithDefaults().MinFreeRootMB,
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
	return &JoinResult{Name: tok.Name, NodeID: nodeID, Briefing: b}, nil
}

// SendBriefing runs the checks and writes the briefing, signed by the host
// and encrypted to the mesh, to the spool.
func SendBriefing(ctx context.Context, sp spool.Spool, id *host.Identity, env brief.Env) (*brief.Briefing, error) {
	env.Spool = sp
	b := brief.Run(ctx, env)
	rcpt, err := id.Mesh.Recipient()
	if err != nil {
		return nil, err
	}
	nodeID := id.NodeID()
	seq := uint64(env.Now.UnixNano())
	data, err := bundle.SealTOML(b, BriefCtx(nodeID, seq), id.Pair.Sign, rcpt)
	if err != nil {
		return nil, err
	}
	if err := sp.Put(ctx, spool.BriefName(nodeID, seq), data); err != nil {
		return nil, fmt.Errorf("send briefing: %w", err)
	}
	return b, nil
}
