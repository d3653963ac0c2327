// Package enrol owns how a host joins the mesh and who is trusted: tokens
// issued by the operator, join requests written by hosts, admissions and
// revocations decided by the mesh, and the Registry computed from them that
// every mesh command uses to know which identity speaks for which node.
//
// Every decision is one create-if-absent write to the spool: the admission
// record enrol/admit/<tokenid> is what makes a token single-use (two
// admissions race for one name, and exactly one wins), and admitting a
// re-enrolment revokes the previous identity in that same record, so nothing
// is ever half-admitted.
package enrol

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/host"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// recordVersion is the version of every enrolment record's format.
const recordVersion = 1

// Issued is what the mesh keeps when it issues a token: the verifier (the
// public half of the token's one-time proof key), never the token.
//
// The same record, in JSON, is a line of the mesh directory's journal of
// the tokens it issued (mesh.TokensJournal), from which admit reads it.
type Issued struct {
	Version  int               `toml:"version" json:"version"`
	TokenID  string            `toml:"token_id" json:"token_id"`
	Name     string            `toml:"name" json:"name"`
	Verifier string            `toml:"verifier" json:"verifier"`
	Reenrol  bool              `toml:"reenrol" json:"reenrol"`
	Expires  time.Time         `toml:"expires" json:"expires"`
	Labels   map[string]string `toml:"labels,omitempty" json:"labels,omitempty"`
	IssuedAt time.Time         `toml:"issued_at" json:"issued_at"`
}

// JoinRequest is what a host writes to ask to be admitted. The bundle is
// signed by the host's new key; Proof is the token proof key's signature
// over the request's identity fields.
type JoinRequest struct {
	Version int         `toml:"version"`
	TokenID string      `toml:"token_id"`
	Name    string      `toml:"name"`
	Host    keys.Public `toml:"host"`
	Time    time.Time   `toml:"time"`
	Proof   string      `toml:"proof"`
}

// Admission is the mesh's decision to admit a join request, or to cancel
// the token before any host used it. Either way it is the one record that
// spends the token.
type Admission struct {
	Version    int               `toml:"version"`
	TokenID    string            `toml:"token_id"`
	Name       string            `toml:"name"`
	NodeID     string            `toml:"node_id,omitempty"`
	Host       keys.Public       `toml:"host,omitempty"`
	Labels     map[string]string `toml:"labels,omitempty"`
	AdmittedAt time.Time         `toml:"admitted_at,omitempty"`
	// Replaces is the node id this re-enrolment revoked, if any.
	Replaces string `toml:"replaces,omitempty"`
	// CancelledAt is set, and the identity fields are empty, when the
	// token was cancelled instead (enrol cancel), for CancelReason. The
	// key is unknown to versions before it, which refuse the record
	// rather than take it for an admission.
	CancelledAt  time.Time `toml:"cancelled_at,omitempty"`
	CancelReason string    `toml:"cancel_reason,omitempty"`
}

// Cancelled reports whether the record cancels its token rather than
// admitting a host.
func (a *Admission) Cancelled() bool { return !a.CancelledAt.IsZero() }

// Revocation records that an identity is refused from then on.
// Revocation is a node identity's revocation record (see host.Revocation,
// which the revoked host reads too).
type Revocation = host.Revocation

// LabelChange records that the mesh changed an identity's labels without
// re-enrolling it (enrol label): the labels it sets and removes, applied
// on top of the labels the identity was admitted with and of the changes
// before it, in the order of their sequence numbers.
type LabelChange struct {
	Version int               `toml:"version"`
	NodeID  string            `toml:"node_id"`
	Name    string            `toml:"name"`
	Seq     uint64            `toml:"seq"`
	Set     map[string]string `toml:"set,omitempty"`
	Remove  []string          `toml:"remove,omitempty"`
	At      time.Time         `toml:"at"`
}

// Refusal records that a join request was refused, so it is decided once
// and not reconsidered by every later admit.
type Refusal struct {
	Version   int       `toml:"version"`
	TokenID   string    `toml:"token_id"`
	HostFP    string    `toml:"host_fp"`
	Reason    string    `toml:"reason"`
	RefusedAt time.Time `toml:"refused_at"`
}

func tokenCtx(id string) bundle.Context {
	return bundle.Context{Kind: "token", Name: spool.TokenName(id)}
}

func joinCtx(tokenID, hostFP string) bundle.Context {
	return bundle.Context{Kind: "join", Node: hostFP, Name: spool.JoinName(tokenID, hostFP)}
}

// SealAdmission makes the record of admission a as admit writes it: its
// object name and bytes, signed by the mesh and sealed to it alone. (The
// benchmarks' simulated fleets write theirs with it too.) It sets the
// record's format version.
func SealAdmission(m *mesh.Mesh, a *Admission) (name string, data []byte, err error) {
	a.Version = recordVersion
	data, err = bundle.SealTOML(a, admitCtx(a.TokenID), m.Pair.Sign, m.Pair.Age.Recipient())
	return spool.AdmitName(a.TokenID), data, err
}

func admitCtx(tokenID string) bundle.Context {
	return bundle.Context{Kind: "admission", Name: spool.AdmitName(tokenID)}
}

func revokeCtx(nodeID string) bundle.Context { return host.RevocationCtx(nodeID) }

func labelCtx(nodeID string, seq uint64) bundle.Context {
	return bundle.Context{Kind: "label-change", Node: nodeID, Name: spool.LabelName(nodeID, seq)}
}

func refusedCtx(tokenID, hostFP string) bundle.Context {
	return bundle.Context{Kind: "join-refusal", Node: hostFP, Name: spool.RefusedName(tokenID, hostFP)}
}

// BriefCtx is the bundle context of a briefing.
func BriefCtx(nodeID string, seq uint64) bundle.Context { return brief.Ctx(nodeID, seq) }

// proofMessage is what the token's proof key signs: the token, the name and
// the host keys, so a proof cannot be moved to another request.
func proofMessage(tokenID, name string, host keys.Public) []byte {
	return []byte(fmt.Sprintf("muster-join-proof-v1\ntoken %s\nname %s\nage %s\nsign %s\n", tokenID, name, host.Age, host.Sign))
}

func encodeKey(k ed25519.PublicKey) string { return base64.RawURLEncoding.EncodeToString(k) }

func decodeKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("bad key %q", s)
	}
	return ed25519.PublicKey(b), nil
}

func encodeSig(k ed25519.PrivateKey, msg []byte) string {
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(k, msg))
}

func verifySig(pub ed25519.PublicKey, msg []byte, sig string) bool {
	b, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && ed25519.Verify(pub, msg, b)
}
