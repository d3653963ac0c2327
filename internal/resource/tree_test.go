package resource

import "testing"

func TestResolveIn(t *testing.T) {
	tests := []struct {
		dir, target, want string
		ok                bool
	}{
		{"/opt", "app-2", "/opt/app-2", true},
		{"/opt", "/srv/app", "/srv/app", true},
		{"/opt", "../srv/./app/", "/srv/app", true},
		{"/etc/x", "../../..", "", false},
		{"/", "..", "", false},
		{"/etc", "/../outside", "", false},
		{"/a/b", "../../c", "/c", true},
	}
	for _, tc := range tests {
		got, ok := resolveIn(tc.dir, tc.target)
		if got != tc.want || ok != tc.ok {
			t.Errorf("resolveIn(%q, %q) = %q, %v; want %q, %v", tc.dir, tc.target, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"/etc/motd": true, "/a": true,
		"": false, "/": false, "etc/motd": false, "/etc/../x": false, "/../x": false,
		"/etc/": false, "/etc//motd": false, "/./etc": false, "/etc/.": false,
	} {
		if err := checkPath(p); (err == nil) != ok {
			t.Errorf("checkPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]int{"0644": 0o644, "644": 0o644, "4755": 0o4755, "07777": 0o7777, "0": 0, "10000": -1, "0x1ff": -1, "-1": -1, "": -1, "8": -1} {
		m, err := parseMode(s)
		if want < 0 {
			if err == nil {
				t.Errorf("parseMode(%q) = %o, want error", s, m)
			}
			continue
		}
		if err != nil || m != uint32(want) {
			t.Errorf("parseMode(%q) = %o, %v; want %o", s, m, err, want)
		}
	}
}
