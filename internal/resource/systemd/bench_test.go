package systemd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
)

// BenchmarkServicesNoop20 measures an apply of 20 services that are
// already as declared (enabled and running: the first look and the
// read-back, nothing changed), beside one `systemctl show` of the same 20
// units. The first is to take at most twice the second. It needs root on
// a host where systemd is the running init, and is skipped elsewhere; the
// lab (make lab) runs it inside a booted host. Its units live in
// /run/systemd/system and are stopped and removed when it ends.
func BenchmarkServicesNoop20(b *testing.B) {
	units := benchUnits(b, 20)
	ctx := context.Background()
	b.Run("apply", func(b *testing.B) {
		s := New("/")
		defer s.Close()
		specs := make([]resource.Spec, len(units))
		for i, u := range units {
			specs[i] = resource.Spec{Kind: resource.Service, Name: u, Enabled: ptr(true), Running: ptr(true)}
		}
		sys := &resource.System{Root: "/", Services: s}
		for b.Loop() {
			for _, r := range sys.Apply(ctx, specs) {
				if r.Status != outcome.OK {
					b.Fatalf("%s: %s %s", r.ID, r.Status, r.Detail)
				}
			}
		}
	})
	b.Run("systemctl-show", func(b *testing.B) {
		args := append([]string{"show"}, units...)
		for b.Loop() {
			if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
				b.Fatalf("systemctl show: %v\n%s", err, out)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

// benchUnits makes n running, runtime-enabled units.
func benchUnits(b *testing.B, n int) []string {
	b.Helper()
	if os.Geteuid() != 0 || !New("/").CanRun() {
		b.Skip("needs root where systemd is the running init (make lab runs it in a booted host)")
	}
	var units []string
	for i := range n {
		u := fmt.Sprintf("muster-bench-%02d.service", i)
		body := "[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n"
		if err := os.WriteFile(filepath.Join("/run/systemd/system", u), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		units = append(units, u)
	}
	systemctl := func(args ...string) {
		if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
			b.Errorf("systemctl %v: %v\n%s", args, err, out)
		}
	}
	b.Cleanup(func() {
		systemctl(append([]string{"stop"}, units...)...)
		systemctl(append([]string{"disable", "--runtime"}, units...)...)
		for _, u := range units {
			os.Remove(filepath.Join("/run/systemd/system", u))
		}
		systemctl("daemon-reload")
	})
	systemctl("daemon-reload")
	systemctl(append([]string{"enable", "--runtime", "--now"}, units...)...)
	return units
}
