package enrol

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// Admitted is one join request that was admitted.
type Admitted struct {
	Name     string
	NodeID   string
	Replaces string
}

// Refused is one join request that was refused, with the reason.
type Refused struct {
	TokenID string
	HostFP  string
	Name    string
	Reason  string
}

func (r Refused) String() string {
	who := r.Name
	if who == "" {
		who = "unknown node"
	}
	return fmt.Sprintf("join request %s from %s (host %s) refused: %s", spool.JoinName(r.TokenID, r.HostFP), who, r.HostFP, r.Reason)
}

// AdmitResult says what Admit decided.
type AdmitResult struct {
	Admitted []Admitted
	Refused  []Refused
}

type pendingJoin struct {
	tokenID, hostFP string
	req             *JoinRequest
	err             error // decoding failed
}

// Admit decides every pending join request in the spool and returns the
// registry as it stands afterwards. Each decision is one create-if-absent
// write, so a request is admitted whole or not at all, and a token is
// admitted at most once even when several admits run at the same time.
func Admit(ctx context.Context, m *mesh.Mesh, now time.Time) (*AdmitResult, *Registry, error) {
	reg, err := LoadRegistry(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	if err := m.Spool.List(ctx, spool.EnrolJoinPrefix, func(i spool.Info) error {
		rest := strings.TrimPrefix(i.Name, spool.EnrolJoinPrefix)
		tid, fp, ok := strings.Cut(rest, "/")
		if !ok || strings.Contains(fp, "/") {
			return nil // not ours: spool verify reports it
		}
		if a := reg.Admitted[tid]; a != nil && a.NodeID == fp {
			return nil
		}
		if reg.Refused[rest] != nil {
			return nil
		}
		names = append(names, i.Name)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if len(names) == 0 {
		return &AdmitResult{}, reg, nil
	}
	// Decode in parallel: it is the costly part.
	pend := make([]pendingJoin, len(names))
	err = parallel(ctx, len(names), func(i int) error {
		tid, fp, _ := strings.Cut(strings.TrimPrefix(names[i], spool.EnrolJoinPrefix), "/")
		p := pendingJoin{tokenID: tid, hostFP: fp}
		data, err := m.Spool.Get(ctx, names[i], 1<<20)
		if err != nil {
			return err
		}
		p.req, p.err = decodeJoin(data, m, tid, fp)
		pend[i] = p
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// Decide requests for one name one after another (a name can have one
	// identity), different names in parallel.
	groups := map[string][]*pendingJoin{}
	var keysOrder []string
	for i := range pend {
		p := &pend[i]
		key := "?" + p.tokenID
		if p.err == nil {
			key = p.req.Name
		}
		if _, ok := groups[key]; !ok {
			keysOrder = append(keysOrder, key)
		}
		groups[key] = append(groups[key], p)
	}
	sort.Strings(keysOrder)
	res := &AdmitResult{}
	var mu sync.Mutex
	err = parallel(ctx, len(keysOrder), func(g int) error {
		for _, p := range groups[keysOrder[g]] {
			adm, reason, err := decide(ctx, m, reg, &mu, p, now)
			if err != nil {
				return err
			}
			mu.Lock()
			if adm != nil {
				res.Admitted = append(res.Admitted, Admitted{Name: adm.Name, NodeID: adm.NodeID, Replaces: adm.Replaces})
			} else if reason != "" {
				name := ""
				if p.req != nil {
					name = p.req.Name
				}
				res.Refused = append(res.Refused, Refused{TokenID: p.tokenID, HostFP: p.hostFP, Name: name, Reason: reason})
			}
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(res.Admitted, func(i, j int) bool { return res.Admitted[i].Name < res.Admitted[j].Name })
	sort.Slice(res.Refused, func(i, j int) bool { return res.Refused[i].String() < res.Refused[j].String() })
	if len(res.Admitted) > 0 {
		// Rebuild from the spool so the registry reflects exactly what
		// was written, including what concurrent admits decided.
		if reg, err = LoadRegistry(ctx, m); err != nil {
			return nil, nil, err
		}
	}
	return res, reg, nil
}

func decodeJoin(data []byte, m *mesh.Mesh, tid, fp string) (*JoinRequest, error) {
	var req JoinRequest
	signer, err := bundle.OpenFromTOML(data, joinCtx(tid, fp), m.Pair.Age, &req)
	if err != nil {
		return nil, err
	}
	v, err := req.Host.Verifier()
	if err != nil {
		return nil, err
	}
	if !v.Equal(signer) {
		return nil, fmt.Errorf("not signed by the host key it carries")
	}
	if req.Host.Fingerprint() != fp {
		return nil, fmt.Errorf("host keys have fingerprint %s, not the %s its name says", req.Host.Fingerprint(), fp)
	}
	if req.TokenID != tid {
		return nil, fmt.Errorf("names token %s but is filed under token %s", req.TokenID, tid)
	}
	return &req, nil
}

// decide admits or refuses one request. It returns the admission, or a
// refusal reason ("" with no admission means another admit decided it).
func decide(ctx context.Context, m *mesh.Mesh, reg *Registry, mu *sync.Mutex, p *pendingJoin, now time.Time) (*Admission, string, error) {
	refuse := func(reason string) (*Admission, string, error) {
		if err := recordRefusal(ctx, m, p.tokenID, p.hostFP, reason, now); err != nil {
			return nil, "", err
		}
		return nil, reason, nil
	}
	if p.err != nil {
		return refuse("cannot be verified: " + p.err.Error())
	}
	req := p.req
	mu.Lock()
	issued := reg.Issued[p.tokenID]
	prior := reg.Admitted[p.tokenID]
	current := reg.Enrolled(req.Name)
	_, knownIdentity := reg.Identities[p.hostFP]
	mu.Unlock()
	if issued == nil {
		return refuse("no token " + p.tokenID + " was ever issued by this mesh")
	}
	v, err := decodeKey(issued.Verifier)
	if err != nil {
		return nil, "", fmt.Errorf("token record %s: %v", spool.TokenName(p.tokenID), err)
	}
	if !verifySig(v, proofMessage(p.tokenID, req.Name, req.Host), req.Proof) {
		return refuse("its proof was not made with token " + p.tokenID)
	}
	if req.Name != issued.Name {
		return refuse(fmt.Sprintf("token was issued for %s, not %s", issued.Name, req.Name))
	}
	if prior != nil {
		return refuse(fmt.Sprintf("token already used: it admitted %s as identity %s at %s", prior.Name, prior.NodeID, prior.AdmittedAt.Format(time.RFC3339)))
	}
	if now.After(issued.Expires) {
		return refuse("token expired at " + issued.Expires.Format(time.RFC3339))
	}
	if knownIdentity {
		return refuse("identity " + p.hostFP + " was admitted before")
	}
	adm := &Admission{
		Version:    recordVersion,
		TokenID:    p.tokenID,
		Name:       req.Name,
		NodeID:     p.hostFP,
		Host:       req.Host,
		Labels:     issued.Labels,
		AdmittedAt: now.UTC(),
	}
	switch {
	case current != nil && !issued.Reenrol:
		return refuse(fmt.Sprintf("%s is already enrolled as identity %s, and a plain token can never take over an enrolled name", req.Name, current.NodeID))
	case current != nil:
		adm.Replaces = current.NodeID
	}
	data, err := bundle.SealTOML(adm, admitCtx(p.tokenID), m.Pair.Sign, m.Pair.Age.Recipient())
	if err != nil {
		return nil, "", err
	}
	if err := m.Spool.Put(ctx, spool.AdmitName(p.tokenID), data); err != nil {
		if errors.Is(err, spool.ErrConflict) {
			// Another admit decided this token first.
			return refuse("token already used: another admission of it was recorded first")
		}
		return nil, "", err
	}
	mu.Lock()
	reg.Admitted[p.tokenID] = adm
	id := &Identity{NodeID: adm.NodeID, Name: adm.Name, Host: adm.Host, Labels: adm.Labels, AdmittedAt: adm.AdmittedAt, TokenID: adm.TokenID}
	reg.Identities[adm.NodeID] = id
	n := reg.Nodes[adm.Name]
	if n == nil {
		n = &Node{Name: adm.Name}
		reg.Nodes[adm.Name] = n
	}
	if n.Current != nil {
		if !n.Current.Revoked() {
			n.Current.RevokedAt, n.Current.RevokeReason = adm.AdmittedAt, "replaced by re-enrolment"
		}
		n.Past = append(n.Past, n.Current)
	}
	n.Current = id
	mu.Unlock()
	return adm, "", nil
}

func recordRefusal(ctx context.Context, m *mesh.Mesh, tid, fp, reason string, now time.Time) error {
	rf := Refusal{Version: recordVersion, TokenID: tid, HostFP: fp, Reason: reason, RefusedAt: now.UTC()}
	data, err := bundle.SealTOML(rf, refusedCtx(tid, fp), m.Pair.Sign, m.Pair.Age.Recipient())
	if err != nil {
		return err
	}
	if err := m.Spool.Put(ctx, spool.RefusedName(tid, fp), data); err != nil && !errors.Is(err, spool.ErrConflict) {
		return err
	}
	return nil
}
