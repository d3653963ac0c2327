package host

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/spool"
)

// Revocation is the record `muster enrol revoke` writes at
// enrol/revoke/<nodeid>: sealed to the mesh, which refuses the identity's
// reports from then on, and to the revoked host itself, which learns from
// it to stop. It lives here because both sides read it.
type Revocation struct {
	Version   int       `toml:"version"`
	NodeID    string    `toml:"node_id"`
	Name      string    `toml:"name"`
	RevokedAt time.Time `toml:"revoked_at"`
	Reason    string    `toml:"reason"`
}

// RevocationCtx binds a revocation to its node and name.
func RevocationCtx(nodeID string) bundle.Context {
	return bundle.Context{Kind: "revocation", Node: nodeID, Name: spool.RevokeName(nodeID)}
}

// ReadRevocation returns this host's revocation if the spool holds one that
// the mesh signed and sealed to it, and nil if it holds none. A record that
// does not open (not the mesh's, or sealed to the mesh alone by an older
// muster) is not taken for one.
func ReadRevocation(ctx context.Context, sp spool.Spool, id *Identity) (*Revocation, error) {
	nodeID := id.NodeID()
	data, err := sp.Get(ctx, spool.RevokeName(nodeID), 1<<16)
	if errors.Is(err, spool.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	meshSign, err := id.Mesh.Verifier()
	if err != nil {
		return nil, err
	}
	var rv Revocation
	if err := bundle.OpenTOML(data, RevocationCtx(nodeID), id.Pair.Age, ed25519.PublicKey(meshSign), &rv); err != nil {
		return nil, nil
	}
	if rv.NodeID != nodeID {
		return nil, fmt.Errorf("revocation %s names node %s", spool.RevokeName(nodeID), rv.NodeID)
	}
	return &rv, nil
}
