package declare

import (
	"maps"
	"testing"

	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// A declare for a fleet of a few thousand nodes on S3 sends one PUT per
// node's bundle, the manifest's and the commit's, and reads nothing back:
// only the commit, the one name another declare may race for, is asked
// for first (HEAD). What BenchmarkDeclareFleet measures at 100,000 nodes
// costs the store this, times fifty.
func TestDeclareFleetRequestsOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet of 2,000 nodes")
	}
	const nodes = 2000
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	f := newFixture(t)
	sp, err := spool.Open(px.URL("mesh"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := f.m.Spool.Get(f.ctx, spool.MeshKeysName, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(f.ctx, spool.MeshKeysName, pub); err != nil {
		t.Fatal(err)
	}
	f.m.Spool = sp
	benchFleet(t, f, nodes)
	o := Options{Recovery: benchRecovery(f)}
	for salt := range 2 {
		px.Reset()
		res := f.mustDeclare(benchParse(t, benchSource(nodes, false, false, salt)), o)
		if len(res.Nodes) != nodes {
			t.Fatalf("declared %d nodes, want %d", len(res.Nodes), nodes)
		}
		// The listing of commits, and the previous generation's commit
		// and manifest (GETs) after the first. A bundle per node, the
		// settings, the manifest and the commit (PUTs).
		want := map[string]int{s3server.KindList: 1, s3server.KindPut: nodes + 3, s3server.KindHead: 1}
		got := px.Count()
		if salt == 1 {
			want[s3server.KindGet] = got[s3server.KindGet]
		}
		if got[s3server.KindGet] > 3 || !maps.Equal(got, want) {
			t.Errorf("declare %d: requests %v, want %v", salt+1, got, want)
		}
	}
}
