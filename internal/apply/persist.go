package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/internal/upgrade"
	"github.com/muster-tool/muster/spool"
)

// The end of a run, once the work is done, keeps what it learned and sends
// its report, in this order, which is what makes a crash at any point lose
// nothing:
//
//  1. report: the report of a run that changed, removed, failed or warned
//     goes into the outbox (or, when the outbox cannot take it, straight to
//     the spool) before anything else moves on, so a crash from here on
//     loses no report: the next run sends it. A report of a run that
//     changed nothing is sent at the end instead (it costs no fsync); a
//     crash loses nothing the next run does not report again.
//  2. ledger: what the host owns now. Kept only after the report is safe:
//     a run whose report was lost leaves the ledger as it was, and the next
//     run reports the change it finds (lostChange).
//  3. state: the generation and commit applied, and the muster versions
//     that failed here.
//  4. launcher: only now that the state holds a failed version may the
//     launcher's rollback note go (upgrade.Upgrade.Saved).
//  5. send: the outbox is flushed, this report last, or the report of an
//     uneventful run is sent, unless it has nothing new to say and the
//     last one went out less than the contact interval ago (quiet.go).
//  6. known-good: the binary that ran a whole run and whose report is out
//     is kept as the one muster-launch restores.
//
// A step that fails leaves the ones after it undone; a ledger or state
// that cannot be kept (a full disk) still lets the report out.
//
// A crash before step 1, once the work is done, loses the report; the
// ledger is as it was, so the next run reports the changes (lostChange).
var persistSteps = []string{"work", "report", "ledger", "state", "launcher", "send", "known-good"}

// crashAfter, set by tests, stops the run right after the named step, as
// a crash there would: nothing after it happens.
var crashAfter string

var errCrashed = errors.New("crashed (a test stopped the run here)")

func crashed(step string) bool { return crashAfter == step }

// sendGrace bounds sending the report after a run's own deadline passed.
const sendGrace = time.Minute

// deliver seals the report and keeps and sends it in the order above. The
// work is done: the report goes out even when the run's time ran out or it
// was told to stop, within a grace period of its own.
func (r *run) deliver(ctx context.Context) error {
	o, res := r.o, r.res
	if crashed("work") {
		return errCrashed
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendGrace)
	defer cancel()
	// A run with nothing new to report sends it only once the last one
	// sent is old enough (see quiet.go); it is then never sealed.
	journal := res.Counts.Eventful() || len(r.notes) > 0
	said := report.Said(res.Report)
	res.Quiet = !journal && quiet(r.state, r.key, said, o.Now(), o.Config.Report.Interval())
	var name string
	var data []byte
	if !res.Quiet {
		seq := uint64(o.Now().UnixNano())
		name = spool.ReportName(r.nodeID, r.gen, seq)
		rcpt, err := o.Identity.Mesh.Recipient()
		if err != nil {
			return err
		}
		// A report too big to send is cut to fit, failed and saying why;
		// one that cannot be is an error: never a report silently not
		// sent.
		payload, rep, err := report.Fit(res.Report)
		if err != nil {
			return err
		}
		res.Report = rep
		if data, err = bundle.Seal(payload, report.Ctx(r.nodeID, r.gen, seq), o.Identity.Pair.Sign, rcpt); err != nil {
			return err
		}
	}

	// 1. report
	if journal {
		if err := outboxPut(r.state, name, data); err != nil {
			// The state disk is full or failing. The spool may take
			// the report directly; if it cannot either, the ledger is
			// left as it was, so the next run reports these changes
			// again (lostChange).
			if serr := putReport(ctx, o.Spool, name, data); serr != nil {
				return fault.WithHint(fault.New(fault.Temporary, fmt.Errorf("the report could not be kept in the outbox (%v) nor sent to spool %s (%v)", err, o.Spool, serr)),
					"free space in the state directory "+r.state+" and make the spool reachable: the next run reports what this one changed")
			}
			res.Sent = true
			journal = false
		}
	}
	if crashed("report") {
		return errCrashed
	}

	// 2. ledger, 3. state. One that cannot be kept does not stop the
	// report going out; the next run starts from the state before, and
	// reports again what this one changed (lostChange).
	var keepErr error
	if !r.hadLedger || !r.ledgerKept && !sameLedger(r.led, r.newLedger) {
		keepErr = saveLedger(r.state, r.key, r.newLedger)
	}
	if crashed("ledger") {
		return errCrashed
	}
	st, up := r.st, r.up
	failedChanged := !slices.Equal(st.FailedVersions, up.Failed())
	if keepErr == nil {
		if st.Generation != r.gen {
			st.AppliedAt = o.Now().UTC()
		}
		changed := st.keepCommit(r.commit, r.f.etag)
		st.FailedVersions = up.Failed()
		if !r.hadState || changed || failedChanged || r.briefed {
			keepErr = saveState(r.state, r.key, st)
		}
	}
	if crashed("state") {
		return errCrashed
	}
	if keepErr != nil {
		if !res.Quiet {
			r.send(ctx, name, data, journal)
		}
		return fault.WithHint(fault.New(fault.Temporary, fmt.Errorf("the host's state could not be kept: %w", keepErr)),
			"free space in the state directory "+r.state+": the next run starts from the state before this one and reports what it changed")
	}

	// 4. launcher
	if err := up.Saved(); err != nil {
		return err
	}
	if crashed("launcher") {
		return errCrashed
	}
	res.Restart = up.Restart()

	// 5. send
	if !res.Quiet {
		if err := r.send(ctx, name, data, journal); err != nil {
			return err
		}
	}
	if res.Sent {
		// A cache: without it the next run sends its report.
		_ = saveReported(r.state, r.key, reported{said: said, at: o.Now()})
	}
	if crashed("send") {
		return errCrashed
	}

	// 6. known-good
	if res.Sent {
		// This run reached its end and its report is out: the binary
		// that ran it is known to work here.
		if _, err := upgrade.AfterReport(r.state, o.Root, o.Version); err != nil {
			res.KnownGoodError = err
		}
	}
	if crashed("known-good") {
		return errCrashed
	}
	return nil
}

// send flushes the outbox (this report, name, in it when journal) and
// sends the report of an uneventful run, keeping it in the outbox when it
// cannot be sent. An error is returned only when the report of an
// uneventful run can be neither sent nor kept; it lost nothing.
func (r *run) send(ctx context.Context, name string, data []byte, journal bool) error {
	res := r.res
	sent, err := flushOutbox(ctx, r.o.Spool, r.state)
	for _, s := range sent {
		if s == name {
			res.Sent = true
		} else {
			res.Flushed++
		}
	}
	if !journal && !res.Sent {
		if err == nil {
			err = putReport(ctx, r.o.Spool, name, data)
			res.Sent = err == nil
		}
		if err != nil {
			if perr := outboxPut(r.state, name, data); perr != nil {
				// Nothing changed, so nothing is lost: the next run
				// reports the same.
				return fault.New(fault.Temporary, fmt.Errorf("keep report in the outbox: %w (sending it failed: %v)", perr, err))
			}
		}
	}
	if !res.Sent {
		res.SendError = err
	}
	return nil
}
