package enrol

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/workpool"
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
	issued          *Issued
	err             error // decoding failed
}

// admitWorkers bounds the admissions in flight. Each waits mostly on the
// spool's synced write; with many in flight a filesystem commits their
// journal entries together, which is what makes admitting thousands of
// hosts take seconds rather than minutes. The decrypting and signing in
// between is bounded by the CPUs anyway.
const admitWorkers = 128

// Admit decides every pending join request in the spool and returns the
// registry as it stands afterwards. Each decision is one create-if-absent
// write, so a request is admitted whole or not at all, and a token is
// admitted at most once even when several admits run at the same time.
func Admit(ctx context.Context, m *mesh.Mesh, now time.Time) (*AdmitResult, *Registry, error) {
	reg, err := LoadRegistry(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	// Pending requests by token: the token id is in each request's
	// name, so they group before anything is decrypted.
	byToken := map[string][]string{}
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
		byToken[tid] = append(byToken[tid], fp)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if len(byToken) == 0 {
		return &AdmitResult{}, reg, nil
	}
	tokens := make([]string, 0, len(byToken))
	for tid := range byToken {
		tokens = append(tokens, tid)
	}
	sort.Strings(tokens)
	var (
		mu      sync.Mutex // guards reg, res, claimed and names
		res     = &AdmitResult{}
		claimed = map[string]bool{}        // host fingerprints being admitted
		names   = map[string]*sync.Mutex{} // one decision per node name at a time
	)
	lockName := func(name string) func() {
		mu.Lock()
		l := names[name]
		if l == nil {
			l = new(sync.Mutex)
			names[name] = l
		}
		mu.Unlock()
		l.Lock()
		return l.Unlock
	}
	// Each token's requests are decoded and decided by one worker, so
	// decrypting some overlaps with writing the decisions of others.
	err = workpool.Run(ctx, len(tokens), admitWorkers, func(i int) error {
		tid := tokens[i]
		pend := make([]*pendingJoin, 0, len(byToken[tid]))
		for _, fp := range byToken[tid] {
			p := &pendingJoin{tokenID: tid, hostFP: fp}
			data, err := m.Spool.Get(ctx, spool.JoinName(tid, fp), 1<<20)
			if err != nil {
				return err
			}
			if p.req, p.err = decodeJoin(data, m, tid, fp); p.err == nil {
				if p.issued, err = reg.issued(ctx, m, &mu, tid); err != nil {
					return err
				}
			}
			pend = append(pend, p)
		}
		// The oldest request first, so that of two hosts racing for
		// one token the one that joined first is admitted.
		sort.SliceStable(pend, func(i, j int) bool { return pend[i].when().Before(pend[j].when()) })
		for _, p := range pend {
			unlock := func() {}
			if p.req != nil {
				unlock = lockName(p.req.Name)
			}
			adm, reason, err := decide(ctx, m, reg, &mu, claimed, p, now)
			unlock()
			if err != nil {
				return err
			}
			mu.Lock()
			if adm != nil {
				res.Admitted = append(res.Admitted, Admitted{Name: adm.Name, NodeID: adm.NodeID, Replaces: adm.Replaces})
			} else if reason != "" {
				res.Refused = append(res.Refused, Refused{TokenID: p.tokenID, HostFP: p.hostFP, Name: p.name(), Reason: reason})
			}
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// Read what concurrent admits decided, so the registry reflects
	// exactly what the spool holds.
	if err := reg.refresh(ctx, m); err != nil {
		return nil, nil, err
	}
	if len(res.Admitted) > 0 {
		kept := res.Admitted[:0]
		for _, a := range res.Admitted {
			if reg.Identities[a.NodeID] != nil {
				kept = append(kept, a)
				continue
			}
			// Another admit, at the same time, gave this name to
			// another identity first.
			res.Refused = append(res.Refused, Refused{TokenID: reg.tokenOf(a.NodeID), HostFP: a.NodeID, Name: a.Name,
				Reason: "another admission of " + a.Name + " was recorded first"})
		}
		res.Admitted = kept
	}
	sort.Slice(res.Admitted, func(i, j int) bool { return res.Admitted[i].Name < res.Admitted[j].Name })
	sort.Slice(res.Refused, func(i, j int) bool { return res.Refused[i].String() < res.Refused[j].String() })
	return res, reg, nil
}

func (p *pendingJoin) name() string {
	if p.req != nil {
		return p.req.Name
	}
	return ""
}

func (p *pendingJoin) when() time.Time {
	if p.req != nil {
		return p.req.Time
	}
	return time.Time{}
}

// tokenOf returns the token that admitted node id nodeID.
func (r *Registry) tokenOf(nodeID string) string {
	for tid, a := range r.Admitted {
		if a.NodeID == nodeID {
			return tid
		}
	}
	return ""
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
// refusal reason ("" with no admission means another admit already
// admitted this very request).
func decide(ctx context.Context, m *mesh.Mesh, reg *Registry, mu *sync.Mutex, claimed map[string]bool, p *pendingJoin, now time.Time) (*Admission, string, error) {
	refuse := func(reason string) (*Admission, string, error) {
		if err := recordRefusal(ctx, m, p.tokenID, p.hostFP, reason, now); err != nil {
			return nil, "", err
		}
		return nil, reason, nil
	}
	if p.err != nil {
		return refuse("cannot be verified: " + p.err.Error())
	}
	req, issued := p.req, p.issued
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
	mu.Lock()
	prior := reg.Admitted[p.tokenID]
	current := reg.Enrolled(req.Name)
	// One identity is admitted once: claim it while deciding, so two
	// requests carrying the same host keys cannot both pass.
	known := reg.Identities[p.hostFP] != nil || claimed[p.hostFP]
	if !known {
		claimed[p.hostFP] = true
		defer func() {
			mu.Lock()
			delete(claimed, p.hostFP)
			mu.Unlock()
		}()
	}
	mu.Unlock()
	if prior != nil {
		return refuse(fmt.Sprintf("token already used: it admitted %s as identity %s at %s", prior.Name, prior.NodeID, prior.AdmittedAt.Format(time.RFC3339)))
	}
	if !now.Before(issued.Expires) {
		return refuse("token expired at " + issued.Expires.Format(time.RFC3339))
	}
	if known {
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
		if !errors.Is(err, spool.ErrConflict) {
			return nil, "", err
		}
		// Another admit decided this token first: if it admitted this
		// same request, there is nothing to say; otherwise the token is
		// spent.
		other, rerr := readAdmission(ctx, m, p.tokenID)
		if rerr != nil {
			return nil, "", rerr
		}
		mu.Lock()
		reg.Admitted[p.tokenID] = other
		mu.Unlock()
		if other.NodeID == p.hostFP {
			return nil, "", nil
		}
		return refuse(fmt.Sprintf("token already used: it admitted %s as identity %s at %s", other.Name, other.NodeID, other.AdmittedAt.Format(time.RFC3339)))
	}
	mu.Lock()
	reg.Admitted[p.tokenID] = adm
	reg.add(adm)
	mu.Unlock()
	return adm, "", nil
}

// readAdmission reads the admission record of token tid.
func readAdmission(ctx context.Context, m *mesh.Mesh, tid string) (*Admission, error) {
	name := spool.AdmitName(tid)
	data, err := m.Spool.Get(ctx, name, 1<<20)
	if err != nil {
		return nil, err
	}
	var a Admission
	if err := bundle.OpenTOML(data, admitCtx(tid), m.Pair.Age, m.Pair.Sign.Public().(ed25519.PublicKey), &a); err != nil {
		return nil, fmt.Errorf("spool %s: object %s: %w", m.Spool, name, err)
	}
	return &a, nil
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
