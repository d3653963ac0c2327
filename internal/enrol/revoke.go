package enrol

import (
	"context"
	"fmt"
	"time"

	"filippo.io/age"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// Revoke decommissions node name: its current identity is refused from
// then on, and nothing is encrypted to it any more.
func Revoke(ctx context.Context, m *mesh.Mesh, reg *Registry, name, reason string, now time.Time) (*Identity, error) {
	id := reg.Enrolled(name)
	if id == nil {
		if n := reg.Nodes[name]; n != nil {
			return nil, fmt.Errorf("node %s has no trusted identity: identity %s was revoked at %s", name, n.Current.NodeID, n.Current.RevokedAt.Format(time.RFC3339))
		}
		return nil, fault.WithHint(fmt.Errorf("node %s is not enrolled", name), "see the enrolled nodes with: muster enrol list")
	}
	rv := Revocation{Version: recordVersion, NodeID: id.NodeID, Name: name, RevokedAt: now.UTC(), Reason: reason}
	// Sealed to the revoked host too, so that it learns to stop; to the
	// mesh alone if its key cannot be sealed to.
	rcpts := []age.Recipient{m.Pair.Age.Recipient()}
	if r, err := id.Host.Recipient(); err == nil && keys.VetRecipient(r) == nil {
		rcpts = append(rcpts, r)
	}
	data, err := bundle.SealTOML(rv, revokeCtx(id.NodeID), m.Pair.Sign, rcpts...)
	if err != nil {
		return nil, err
	}
	if err := m.Spool.Put(ctx, spool.RevokeName(id.NodeID), data); err != nil {
		return nil, err
	}
	if reg.revocations == nil {
		reg.revocations = map[string]*Revocation{}
	}
	reg.revocations[id.NodeID] = &rv
	id.RevokedAt, id.RevokeReason = rv.RevokedAt, reason
	return id, nil
}
