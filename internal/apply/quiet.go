package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
)

// A run with nothing new to report need not send its report every time.
//
// A run that changed, removed and failed nothing and has no note says
// what the last report this host sent said, apart from its times
// (report.Said): the same generation and commit, the same lines with the
// same details, the same ledger, the same newest generation seen, the
// same muster version. Sending that every 15 minutes tells the mesh only
// that the host is alive, and costs the store a PUT per host per run. So
// such a run sends its report only when the last report this host sent
// is the host config's [report] contact_interval old (one hour unless
// set; 0 sends one every run). The mesh's last contact of a live host is
// then at most that interval and one timer period old, and a quiet fleet
// costs one PUT per host per interval. Anything new is sent by the run
// that finds it.
//
// What was sent last is kept in the state directory (reportedFile),
// authenticated like the state: a line "SAID TIME". It is kept once a
// report is out, without a sync: a crash that loses it costs one report
// more, never one less.
const reportedFile = "reported"

// reported is the last report this host sent: what it said and when.
type reported struct {
	said [32]byte
	at   time.Time
}

// loadReported reads the record; anything missing or unreadable is no
// record, which sends the next report.
func loadReported(dir string, key stateKey) (reported, bool) {
	data, err := os.ReadFile(filepath.Join(dir, reportedFile))
	if err != nil {
		return reported{}, false
	}
	body, err := key.open(data)
	if err != nil {
		return reported{}, false
	}
	said, at, ok := strings.Cut(strings.TrimSuffix(string(body), "\n"), " ")
	sum, err1 := hex.DecodeString(said)
	t, err2 := time.Parse(time.RFC3339Nano, at)
	if !ok || err1 != nil || err2 != nil || len(sum) != sha256.Size {
		return reported{}, false
	}
	var rec reported
	copy(rec.said[:], sum)
	rec.at = t
	return rec, true
}

func saveReported(dir string, key stateKey, rec reported) error {
	body := fmt.Appendf(nil, "%x %s\n", rec.said, rec.at.UTC().Format(time.RFC3339Nano))
	return atomicfile.WriteCache(filepath.Join(dir, reportedFile), key.seal(body), 0o600)
}

// quiet reports whether a run whose report says said, at now, may leave
// it unsent: the last report sent said the same less than interval ago.
func quiet(dir string, key stateKey, said [32]byte, now time.Time, interval time.Duration) bool {
	if interval <= 0 {
		return false
	}
	rec, ok := loadReported(dir, key)
	return ok && rec.said == said && !now.Before(rec.at) && now.Sub(rec.at) < interval
}
