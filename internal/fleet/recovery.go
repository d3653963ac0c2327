package fleet

import (
	"encoding/json"
	"fmt"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/ledger"
)

// RecoveryCopy is the newest recovery copy the mesh holds for a node name:
// the ledger its host reported owning, so that a host that lost its state,
// or a new identity that replaced it, can find and clean what its
// predecessor owned.
type RecoveryCopy struct {
	// NodeID is the identity whose report carried the copy: the node's
	// current identity, or one it replaced.
	NodeID string
	// Generation and Seq name that report.
	Generation uint64
	Seq        uint64
	Ledger     []ledger.Entry
}

// RecoveryCopies returns the newest recovery copy of every node name that
// has one. declare puts it in each node's declaration (Recovery,
// RecoveryFrom).
//
// The copy comes from the node's current identity if it is trusted and has
// sent a usable report (verified, filed under its own name, of a committed
// generation). Otherwise it comes from the newest usable report of the
// identities the name had before: their reports no longer count for any
// generation, but what they owned is exactly what a re-enrolled host must
// recover. A revoked identity's report counts only for a generation
// committed before it was revoked, since nothing declared later was ever
// sealed to it.
func (s *State) RecoveryCopies() (map[string]RecoveryCopy, error) {
	out := map[string]RecoveryCopy{}
	for name, n := range s.reg.Nodes {
		var from *enrol.Identity
		var blob *ledgerRef
		if cur := n.Current; cur != nil && !cur.Revoked() {
			if nf := s.cache.Nodes[cur.NodeID]; nf != nil && nf.Ledger != nil {
				from, blob = cur, nf.Ledger
			}
		}
		if blob == nil {
			ids := append([]*enrol.Identity(nil), n.Past...)
			if cur := n.Current; cur != nil && cur.Revoked() {
				ids = append(ids, cur)
			}
			for _, id := range ids {
				nf := s.cache.Nodes[id.NodeID]
				if nf == nil || nf.Ledger == nil {
					continue
				}
				if l := nf.Ledger; blob == nil || l.Gen > blob.Gen || l.Gen == blob.Gen && l.Seq > blob.Seq {
					from, blob = id, l
				}
			}
		}
		if blob == nil {
			continue
		}
		var entries []ledger.Entry
		if err := json.Unmarshal(s.cache.Ledgers[blob.Sum], &entries); err != nil {
			return nil, fmt.Errorf("report cache: recovery copy of %s: %v", name, err)
		}
		out[name] = RecoveryCopy{NodeID: from.NodeID, Generation: blob.Gen, Seq: blob.Seq, Ledger: entries}
	}
	return out, nil
}
