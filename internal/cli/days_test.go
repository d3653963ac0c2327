package cli

import (
	"strings"
	"testing"
	"time"
)

// A validity period is given as Go gives durations or in whole days, and
// shown in days when it is whole days; anything else is a usage error
// that says what is wanted.
func TestDaysFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d":   7 * 24 * time.Hour,
		"1d":   24 * time.Hour,
		"36h":  36 * time.Hour,
		"90m":  90 * time.Minute,
		"-1h":  -time.Hour, // negative: the command refuses it, naming the flag
		"0d":   0,
		"168h": 7 * 24 * time.Hour,
	} {
		var d daysFlag
		if err := d.Set(in); err != nil || time.Duration(d) != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
	for _, in := range []string{"", "7", "7x", "d", "-7d", "1.5d", "99999999d", "7 d"} {
		var d daysFlag
		if err := d.Set(in); err == nil || !strings.Contains(err.Error(), `"7d"`) {
			t.Errorf("Set(%q) = %v, %v; want an error saying what is wanted", in, time.Duration(d), err)
		}
	}
	for d, want := range map[time.Duration]string{7 * 24 * time.Hour: "7d", 36 * time.Hour: "36h0m0s", 0: "0s"} {
		if got := (*daysFlag)(&d).String(); got != want {
			t.Errorf("String(%v) = %q, want %q", d, got, want)
		}
	}
}
