//go:build !linux && !darwin

package enrol

import "time"

func cpuTime() time.Duration { return 0 }
func sysTime() time.Duration { return 0 }
