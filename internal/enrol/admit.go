package enrol

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/keys"
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
	// invalid is why the request is refused whatever else is decided
	// (it cannot be verified, names no token of this mesh, or its proof
	// or name do not match the token), or "".
	invalid string
}

// decision is what was decided for one request: an admission, or a
// refusal with its reason, and the sealed record that says so.
type decision struct {
	p      *pendingJoin
	adm    *Admission // nil for a refusal
	reason string
	name   string // of the record in the spool
	data   []byte
	// refusal is the refusal record as written; nil when another admit
	// recorded its own first.
	refusal *Refusal
	// other is the admission another admit recorded for the token first,
	// when it did.
	other *Admission
}

// Bounds on admitting. Decoding reads two objects per request and
// decrypts them: reading waits on remote spools, so many are in flight.
// Decisions are written admitBatch records at a time with spool.PutMany,
// which a directory spool makes durable with one sync per batch instead of
// one per record. admitWriters batches are sealed and written at once, so
// that sealing some overlaps with syncing others, and so that a spool that
// writes a batch's records one after another (an object store) still has
// several writes in flight.
const (
	admitWorkers = 128
	admitBatch   = 256
	admitWriters = 4
)

// Admit decides every pending join request in the spool and returns the
// registry as it stands afterwards. Each decision is one create-if-absent
// write, so a request is admitted whole or not at all, and a token is
// admitted at most once even when several admits run at the same time.
//
// Every request is decoded and checked first. The decisions are then made
// in rounds: a round decides each request whose outcome the decisions
// written so far settle, oldest first, and writes them in batches. A
// request that depends on an admission of the same round (a later request
// of the same token, or one for a name or host keys being admitted) waits
// for the next round, so nothing is decided on an admission that another
// admit may yet have recorded differently.
func Admit(ctx context.Context, m *mesh.Mesh, now time.Time) (*AdmitResult, *Registry, error) {
	return admit(ctx, m, now, true)
}

// PreviewAdmit decides every pending join request as Admit would, and
// writes nothing: the registry it returns is the one Admit would leave if
// no other admit ran in between, for a dry run that shows what a real run
// would do to hosts still waiting to join.
func PreviewAdmit(ctx context.Context, m *mesh.Mesh, now time.Time) (*AdmitResult, *Registry, error) {
	return admit(ctx, m, now, false)
}

// Pending counts the join requests no admit has decided yet, for commands
// that read the mesh and must not change it (report, enrol list): they
// say how many wait, and leave admission to enrol admit and declare.
func Pending(ctx context.Context, m *mesh.Mesh, reg *Registry) (int, error) {
	byToken, err := pendingByToken(ctx, m, reg)
	n := 0
	for _, fps := range byToken {
		n += len(fps)
	}
	return n, err
}

// pendingByToken lists the undecided join requests by token: the token id
// is in each request's name, so they group before anything is decrypted.
// A request is decided once an admission or a refusal names it, and
// requests stay in the spool, so most of a large fleet's are decided: a
// token's directory of requests that held only decided ones, and whose
// stamp is still the one recorded then (spool.ListDirs), is not read
// again, as long as the registry still holds each decision.
func pendingByToken(ctx context.Context, m *mesh.Mesh, reg *Registry) (map[string][]string, error) {
	byToken := map[string][]string{}
	decided := func(tid, fp string) bool {
		a, rf := reg.JoinDecision(tid, fp)
		return a != nil || rf != nil
	}
	tokenOf := func(dir string) string { return dir[len(spool.EnrolJoinPrefix) : len(dir)-1] }
	listed := make(map[string]joinDir, len(reg.joinDirs))
	err := spool.ListDirs(ctx, m.Spool, spool.EnrolJoinPrefix, func(dir string, st spool.DirStamp) bool {
		tid := tokenOf(dir)
		jd, ok := reg.joinDirs[tid]
		if !ok || jd.Stamp != st {
			return false
		}
		for _, fp := range jd.Hosts {
			if !decided(tid, fp) {
				return false
			}
		}
		return true
	}, func(d spool.DirListing) error {
		tid := tokenOf(d.Dir)
		if d.Known {
			listed[tid] = reg.joinDirs[tid]
			return nil
		}
		var hosts []string
		for _, name := range d.Names {
			fp := name[len(d.Dir):]
			if decided(tid, fp) {
				hosts = append(hosts, fp)
			} else {
				byToken[tid] = append(byToken[tid], fp)
			}
		}
		if byToken[tid] == nil && !d.Stamp.IsZero() {
			listed[tid] = joinDir{Stamp: d.Stamp, Hosts: hosts}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !maps.EqualFunc(listed, reg.joinDirs, func(a, b joinDir) bool { return a.Stamp == b.Stamp && slices.Equal(a.Hosts, b.Hosts) }) {
		reg.joinDirs, reg.cacheStale = listed, true
		reg.saveCache(m)
	}
	return byToken, nil
}

func admit(ctx context.Context, m *mesh.Mesh, now time.Time, write bool) (*AdmitResult, *Registry, error) {
	reg, err := LoadRegistry(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	byToken, err := pendingByToken(ctx, m, reg)
	if err != nil {
		return nil, nil, err
	}
	if len(byToken) == 0 {
		return &AdmitResult{}, reg, nil
	}
	pend, err := decodePending(ctx, m, reg, byToken)
	if err != nil {
		return nil, nil, err
	}
	// The oldest request first, so that of two hosts racing for one
	// token, or two tokens for one name, the one that joined first is
	// admitted.
	sort.Slice(pend, func(i, j int) bool {
		a, b := pend[i], pend[j]
		if !a.when().Equal(b.when()) {
			return a.when().Before(b.when())
		}
		if a.tokenID != b.tokenID {
			return a.tokenID < b.tokenID
		}
		return a.hostFP < b.hostFP
	})
	record := func(ds []*decision) error {
		if !write {
			return nil
		}
		return writeDecisions(ctx, m, ds, now)
	}
	res := &AdmitResult{}
	var mem registryMem // where the identities admitted are made
	for rounds := 0; len(pend) > 0; rounds++ {
		// Each round admits a nanosecond after the one before: a
		// re-enrolment decided on an admission of an earlier round must
		// come after it when any reader replays the admissions, which
		// it does by time, then token id.
		at := now.Add(time.Duration(rounds))
		var (
			round []*decision
			later []*pendingJoin
			// Tokens with a request waiting or being admitted: their
			// later requests wait too.
			waiting = map[string]bool{}
			taken   = claims{names: map[string]bool{}, hosts: map[string]bool{}}
		)
		for _, p := range pend {
			d, wait := (*decision)(nil), waiting[p.tokenID]
			if !wait {
				d, wait = decide(reg, taken, p, at)
			}
			switch {
			case wait:
				waiting[p.tokenID] = true
				later = append(later, p)
			case d == nil:
				// Another admit admitted this very request.
			case d.adm != nil:
				waiting[p.tokenID] = true
				taken.names[d.adm.Name], taken.hosts[d.adm.NodeID] = true, true
				round = append(round, d)
			default:
				round = append(round, d)
			}
		}
		if err := record(round); err != nil {
			return nil, nil, err
		}
		// A token another admit decided first is spent, unless what it
		// admitted was this very request.
		var spent []*decision
		for _, d := range round {
			if d.other == nil {
				d.apply(reg, res, &mem, len(round))
				continue
			}
			reg.Admitted[d.p.tokenID] = d.other
			if d.other.NodeID != d.p.hostFP {
				spent = append(spent, &decision{p: d.p, reason: tokenUsed(d.other)})
			}
		}
		if err := record(spent); err != nil {
			return nil, nil, err
		}
		for _, d := range spent {
			d.apply(reg, res, &mem, len(spent))
		}
		pend = later
	}
	if write {
		// Read what concurrent admits decided, so the registry
		// reflects exactly what the spool holds.
		if err := reg.refresh(ctx, m); err != nil {
			return nil, nil, err
		}
		res.Admitted = keepRecorded(reg, res)
	}
	sort.Slice(res.Admitted, func(i, j int) bool { return res.Admitted[i].Name < res.Admitted[j].Name })
	sort.Slice(res.Refused, func(i, j int) bool { return res.Refused[i].String() < res.Refused[j].String() })
	return res, reg, nil
}

// keepRecorded returns the admissions of res that the registry, refreshed
// after writing, holds; each of the others is added to res.Refused.
func keepRecorded(reg *Registry, res *AdmitResult) []Admitted {
	kept := res.Admitted[:0]
	for _, a := range res.Admitted {
		if reg.Identities[a.NodeID] != nil {
			kept = append(kept, a)
			continue
		}
		// Another admit, at the same time, gave this name to another
		// identity first.
		res.Refused = append(res.Refused, Refused{TokenID: reg.tokenOf(a.NodeID), HostFP: a.NodeID, Name: a.Name,
			Reason: "another admission of " + a.Name + " was recorded first"})
	}
	return kept
}

// decodePending reads and checks every pending request, and the record of
// the token each names, in parallel. Each token's record is read once, by
// the worker that reads that token's requests.
func decodePending(ctx context.Context, m *mesh.Mesh, reg *Registry, byToken map[string][]string) ([]*pendingJoin, error) {
	tokens := make([]string, 0, len(byToken))
	for tid := range byToken {
		tokens = append(tokens, tid)
	}
	perToken := make([][]*pendingJoin, len(tokens))
	var mu sync.Mutex // guards reg.Issued
	// Many requests are read at once, as reading waits on the spool, but
	// only as many are decoded at once as there are processors: more
	// would only take turns on them, preempting one another.
	cpus := make(chan struct{}, runtime.GOMAXPROCS(0))
	err := workpool.Run(ctx, len(tokens), admitWorkers, func(i int) error {
		tid := tokens[i]
		for _, fp := range byToken[tid] {
			p := &pendingJoin{tokenID: tid, hostFP: fp}
			data, err := m.Spool.Get(ctx, spool.JoinName(tid, fp), 1<<20)
			if errors.Is(err, spool.ErrNotFound) {
				// Decided by another admit since it was listed, and
				// removed by spool gc: nothing left to decide.
				continue
			}
			if err != nil {
				return err
			}
			cpus <- struct{}{}
			p.req, err = decodeJoin(data, m, tid, fp)
			switch {
			case err != nil:
				p.invalid = "cannot be verified: " + err.Error()
			default:
				// A key that cannot be trusted is refused whatever the
				// token says: nothing could be sealed to the host, or
				// anyone could sign as it.
				if err := p.req.Host.Vet(); err != nil {
					p.invalid = "its host keys cannot be trusted: " + err.Error()
				}
			}
			<-cpus
			if p.req != nil && p.invalid == "" {
				if p.issued, err = reg.issued(ctx, m, &mu, tid); err != nil {
					return err
				}
				cpus <- struct{}{}
				p.invalid, err = p.check()
				<-cpus
				if err != nil {
					return err
				}
			}
			perToken[i] = append(perToken[i], p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var all []*pendingJoin
	for _, ps := range perToken {
		all = append(all, ps...)
	}
	return all, nil
}

// check returns the reason to refuse a decoded request that the request
// and its token record give on their own, or "".
func (p *pendingJoin) check() (string, error) {
	req, issued := p.req, p.issued
	if issued == nil {
		return "no token " + p.tokenID + " was ever issued by this mesh", nil
	}
	v, err := decodeKey(issued.Verifier)
	if err != nil {
		return "", fmt.Errorf("token record %s: %v", spool.TokenName(p.tokenID), err)
	}
	if !verifySig(v, proofMessage(p.tokenID, req.Name, req.Host), req.Proof) {
		return "its proof was not made with token " + p.tokenID, nil
	}
	if req.Name != issued.Name {
		return fmt.Sprintf("token was issued for %s, not %s", issued.Name, req.Name), nil
	}
	return "", nil
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

// claims are the node names and host fingerprints that admissions of the
// current round take.
type claims struct {
	names, hosts map[string]bool
}

// decide admits or refuses one checked request against the decisions
// written so far. It says to wait when the answer depends on an admission
// of this round (one for the same name or host keys), which is then
// decided first, and returns no decision when another admit already
// admitted this very request.
func decide(reg *Registry, taken claims, p *pendingJoin, now time.Time) (d *decision, wait bool) {
	refuse := func(reason string) (*decision, bool) { return &decision{p: p, reason: reason}, false }
	if p.invalid != "" {
		return refuse(p.invalid)
	}
	req, issued := p.req, p.issued
	if prior := reg.Admitted[p.tokenID]; prior != nil {
		if prior.NodeID == p.hostFP {
			return nil, false
		}
		return refuse(tokenUsed(prior))
	}
	if !now.Before(issued.Expires) {
		return refuse("token expired at " + issued.Expires.Format(time.RFC3339))
	}
	if taken.names[req.Name] || taken.hosts[p.hostFP] {
		return nil, true
	}
	// One identity is admitted once.
	if reg.Identities[p.hostFP] != nil {
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
	switch current := reg.Enrolled(req.Name); {
	case current != nil && !issued.Reenrol:
		return refuse(fmt.Sprintf("%s is already enrolled as identity %s, and a plain token can never take over an enrolled name", req.Name, current.NodeID))
	case current != nil:
		adm.Replaces = current.NodeID
		if len(adm.Labels) == 0 {
			// A rebuilt host is the same node: it keeps its labels as
			// they are now, so the roles that select it by label go on
			// applying to it.
			adm.Labels = current.Labels
		}
	}
	return &decision{p: p, adm: adm}, false
}

func tokenUsed(a *Admission) string {
	if a.Cancelled() {
		s := "token cancelled at " + a.CancelledAt.Format(time.RFC3339)
		if a.CancelReason != "" {
			s += ": " + a.CancelReason
		}
		return s
	}
	return fmt.Sprintf("token already used: it admitted %s as identity %s at %s", a.Name, a.NodeID, a.AdmittedAt.Format(time.RFC3339))
}

// writeDecisions seals the decisions and writes them, admitBatch at a time
// with spool.PutMany. A batch that meets a record another admit wrote
// first is written again one record at a time, so each record gets Put's
// own answer: an admission that lost its token learns the admission that
// won (d.other), and a refusal already recorded is left as it is.
func writeDecisions(ctx context.Context, m *mesh.Mesh, ds []*decision, now time.Time) error {
	batches := (len(ds) + admitBatch - 1) / admitBatch
	return workpool.Run(ctx, batches, admitWriters, func(i int) error {
		batch := ds[i*admitBatch : min((i+1)*admitBatch, len(ds))]
		objs := make([]spool.Object, len(batch))
		for j, d := range batch {
			if err := d.seal(m, now); err != nil {
				return err
			}
			objs[j] = spool.Object{Name: d.name, Data: d.data}
		}
		err := spool.PutMany(ctx, m.Spool, objs)
		if !errors.Is(err, spool.ErrConflict) {
			return err
		}
		for _, d := range batch {
			if err := d.put(ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// seal makes the record of the decision.
func (d *decision) seal(m *mesh.Mesh, now time.Time) error {
	tid, fp := d.p.tokenID, d.p.hostFP
	var err error
	if d.adm != nil {
		d.name, d.data, err = SealAdmission(m, d.adm)
		return err
	}
	d.refusal = &Refusal{Version: recordVersion, TokenID: tid, HostFP: fp, Reason: d.reason, RefusedAt: now.UTC()}
	d.name = spool.RefusedName(tid, fp)
	d.data, err = bundle.SealTOML(d.refusal, refusedCtx(tid, fp), m.Pair.Sign, refusalReaders(m, d.p)...)
	return err
}

// refusalReaders are who can read a refusal: the mesh, and the host that
// asked when its request could be read and its age key can be sealed to,
// so that the host can say why it was refused (see ReadJoinState). Only
// the holder of the key that signed the request reads it.
func refusalReaders(m *mesh.Mesh, p *pendingJoin) []age.Recipient {
	readers := []age.Recipient{m.Pair.Age.Recipient()}
	if p.req != nil {
		if r, err := p.req.Host.Recipient(); err == nil && keys.VetRecipient(r) == nil {
			readers = append(readers, r)
		}
	}
	return readers
}

// put writes the decision's record on its own.
func (d *decision) put(ctx context.Context, m *mesh.Mesh) error {
	err := m.Spool.Put(ctx, d.name, d.data)
	if !errors.Is(err, spool.ErrConflict) {
		return err
	}
	if d.adm == nil {
		d.refusal = nil // another admit recorded this refusal first
		return nil
	}
	// Another admit decided this token first.
	d.other, err = readAdmission(ctx, m, d.p.tokenID)
	return err
}

// apply enters a written decision in the registry and the result, the
// identity admitted made in mem (left says how many more may be, as for
// Registry.add). A refusal this admit wrote is entered as it is, so that
// refresh need not read it back.
func (d *decision) apply(reg *Registry, res *AdmitResult, mem *registryMem, left int) {
	p := d.p
	if d.adm != nil {
		reg.Admitted[p.tokenID] = d.adm
		reg.add(d.adm, mem, left)
		res.Admitted = append(res.Admitted, Admitted{Name: d.adm.Name, NodeID: d.adm.NodeID, Replaces: d.adm.Replaces})
		return
	}
	if d.refusal != nil {
		reg.Refused[p.tokenID+"/"+p.hostFP] = d.refusal
	}
	res.Refused = append(res.Refused, Refused{TokenID: p.tokenID, HostFP: p.hostFP, Name: p.name(), Reason: d.reason})
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
